"""A plain blocking client's calls go straight to its pooled connections
(fairque.engine.direct) with redis-py's outcomes: replies, error replies, a connection the
server closed, a server gone, a function it lost; and other clients keep redis-py's path."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, cast

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from fairque import DuplicateTask, FairQueue, ServerUnavailable, Task, TaskState
from fairque.engine.blocking_routes import OneServer
from fairque.engine.direct import DirectCalls, direct_calls
from fairque.engine.routes import SyncNode
from fairque.servers.embedded import LocalServer


@pytest.fixture(scope="module")
def valkey() -> Iterator[LocalServer]:
    with LocalServer() as started:
        yield started


def no_retry_client(url: str, **options: Any) -> redis.Redis:
    """A client that gives up at the first connection error: what succeeds with it did
    not need redis-py's retries (or their backoff)."""
    return redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **options)


def direct_of(queue: FairQueue) -> DirectCalls:
    direct = one_server(queue).direct
    assert direct is not None
    return direct


def one_server(queue: FairQueue) -> SyncNode:
    route = queue.executor.route
    assert isinstance(route, OneServer)
    return route.the_node


def test_a_queue_from_a_url_sends_directly(valkey: LocalServer, namespace: str) -> None:
    with FairQueue(valkey.url, namespace) as queue:
        task_id = queue.push(Task(user_id="u", payload={"text": "ünïcödé"}))
        assert direct_of(queue).kept  # one connection kept for the next call
        [leased] = queue.pop()
        assert (leased.task_id, leased.payload) == (task_id, {"text": "ünïcödé"})


def test_an_error_reply_leaves_the_connection_usable(valkey: LocalServer, namespace: str) -> None:
    with FairQueue(valkey.url, namespace) as queue:
        queue.push(Task(user_id="u", task_id="t1"))
        [kept] = direct_of(queue).kept
        with pytest.raises(DuplicateTask):
            queue.push(Task(user_id="u", task_id="t1"))
        assert direct_of(queue).kept == [kept]
        assert queue.push(Task(user_id="u", task_id="t2")) == "t2"


def test_a_connection_the_server_closed_is_made_again_at_once(
    valkey: LocalServer, namespace: str
) -> None:
    with FairQueue(namespace=namespace, client=no_retry_client(valkey.url)) as queue:
        queue.push(Task(user_id="u"))
        assert len(direct_of(queue).kept) == 1
        admin = redis.Redis.from_url(valkey.url)
        admin.client_kill_filter(_type="normal", skipme=True)
        admin.close()
        queue.push(Task(user_id="u", task_id="after"))  # no retry was needed
        after = queue.get("after")
        assert after is not None
        assert after.user_id == "u"


def test_a_lost_function_is_loaded_again(valkey: LocalServer, namespace: str) -> None:
    with FairQueue(valkey.url, namespace) as queue:
        queue.push(Task(user_id="u"))
        queue.redis.function_flush()
        assert queue.push(Task(user_id="u", task_id="reloaded")) == "reloaded"


def test_a_queues_own_calls_take_one_connection(valkey: LocalServer, namespace: str) -> None:
    admin = redis.Redis.from_url(valkey.url)
    admin.function_flush()  # the first call loads the library, on the same connection
    client = redis.Redis.from_url(valkey.url, client_name=namespace)
    with FairQueue(namespace=namespace, client=client) as queue:
        queue.push(Task(user_id="u"))
        queue.stats()
        assert [c["name"] for c in admin.client_list()].count(namespace) == 1
    admin.close()


def test_a_server_gone_is_server_unavailable(namespace: str) -> None:
    server = LocalServer().start()
    queue = FairQueue(namespace=namespace, client=no_retry_client(server.url))
    try:
        queue.push(Task(user_id="u"))
        server.close()
        with pytest.raises(ServerUnavailable):
            queue.push(Task(user_id="u"))
        assert not direct_of(queue).kept  # the broken connection was not kept
    finally:
        queue.close()
        server.close()


def test_threads_share_the_pool(valkey: LocalServer, namespace: str) -> None:
    with FairQueue(valkey.url, namespace) as queue:
        ids: list[str] = []

        def produce(thread: int) -> None:
            ids.extend(queue.push(Task(user_id=f"u{thread}")) for _ in range(100))

        threads = [threading.Thread(target=produce, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(set(ids)) == 800
        assert queue.stats().states[TaskState.QUEUED] == 800
        assert len(direct_of(queue).kept) <= 1


def test_close_gives_the_kept_connection_back(valkey: LocalServer, namespace: str) -> None:
    client = redis.Redis.from_url(valkey.url)
    queue = FairQueue(namespace=namespace, client=client)
    queue.push(Task(user_id="u"))
    direct = direct_of(queue)
    direct.close()
    assert not direct.kept
    queue.push(Task(user_id="u"))  # and takes one again
    queue.close()


class Traced(redis.Redis):
    """A client whose commands an instrumentation sees (as tracing wraps them)."""

    seen: list[Any]

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.seen.append(args[0])
        return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


def test_other_clients_keep_redis_pys_path(valkey: LocalServer, namespace: str) -> None:
    assert direct_calls(redis.Redis.from_url(valkey.url, protocol=3)) is None
    traced = cast("Traced", Traced.from_url(valkey.url))
    traced.seen = []
    assert direct_calls(traced) is None
    with FairQueue(namespace=namespace, client=traced) as queue:
        queue.push(Task(user_id="u"))
    assert "FCALL" in traced.seen
    single = redis.Redis.from_url(valkey.url, single_connection_client=True)
    with FairQueue(namespace=namespace, client=single) as queue:
        direct = one_server(queue).direct
        assert direct is None or not direct.usable()
        assert queue.push(Task(user_id="u", task_id="single")) == "single"
