"""Writes that wait for replicas: a script call followed by ``WAIT`` on the same connection.

Replication is asynchronous: a master that acknowledged a push and died before sending it
to a replica loses it when the replica is promoted. ``WAIT n timeout`` blocks until ``n``
replicas have everything this connection wrote, so it must follow the script on the
connection that sent it: both go in one pipeline, and on a cluster both are sent to the
node that owns the namespace's slot.
"""

from __future__ import annotations

from typing import Any, TypeVar

from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster
from redis.exceptions import ClusterError, ReadOnlyError, ResponseError, TryAgainError

from fairque.engine.calls import Call, Replicas
from fairque.engine.connect import AsyncClient, SyncClient
from fairque.errors import NotReplicated, from_script_error

T = TypeVar("T")


def script_failure(exc: ResponseError) -> Exception:
    """What a failed script call raises: a server in failover (a cluster's slots moving,
    a demoted master's READONLY) stays a redis-py error that the caller may try again; an
    error of a fairque script becomes its own exception."""
    if isinstance(exc, ClusterError | TryAgainError | ReadOnlyError):
        return exc
    return from_script_error(str(exc))


# How many times a call loads its script's library before it gives up on a server that
# keeps losing it. One load is the usual case (a library loads on its first call); a
# second is needed when the server's functions were replaced between the load and the
# call: a failover's full sync replaces a demoted master's functions with its new
# master's, and a call sent then finds no function again (its next load is refused with
# READONLY, an outage, or succeeds where the node is a master again).
LIBRARY_LOADS = 3


def function_missing(exc: ResponseError) -> bool:
    """True if the server did not have the script's function (load its library)."""
    return str(exc).startswith("Function not found")


def pipeline(
    client: SyncClient | AsyncClient, call: Call[Any], replicas: Replicas, *, load: bool
) -> Any:
    """A pipeline of the script's function call and WAIT on the same node, after loading
    the script's library if ``load``.

    An asyncio cluster client must be initialised first (its slots known).
    """
    pipe = client.pipeline(transaction=False)
    where = {}
    if isinstance(client, RedisCluster | AsyncRedisCluster):
        where["target_nodes"] = client.get_node_from_key(call.keys[0])
    # execute_command: redis-py's cluster pipeline would send FUNCTION LOAD elsewhere.
    if load:
        pipe.execute_command("FUNCTION LOAD", "REPLACE", call.script.library, **where)
    function = call.script.function
    pipe.execute_command("FCALL", function, len(call.keys), *call.keys, *call.args, **where)
    wait_ms = max(1, round(replicas.timeout * 1000))
    pipe.execute_command("WAIT", replicas.count, wait_ms, **where)
    return pipe


def needs_library(results: list[Any]) -> bool:
    """True if the server did not have the script's function (send the pipeline again,
    loading it first). The call's reply is the last but one, after the load's if it was
    sent; a load refused (a demoted master's READONLY) is not tried again:
    :func:`replicated_reply` raises its error."""
    call_reply = results[-2]
    if _load_refused(results):
        return False
    return isinstance(call_reply, ResponseError) and function_missing(call_reply)


def _load_refused(results: list[Any]) -> bool:
    """True if the pipeline loaded the library (its first reply, before the call's and WAIT's)
    and the load failed."""
    return len(results) > 2 and isinstance(results[0], ResponseError)


def replicated_reply(call: Call[T], results: list[Any], replicas: Replicas) -> T:
    """The parsed reply of the script; raises :class:`NotReplicated` if too few replicas
    confirmed it (the write itself stands)."""
    reply, acknowledged = results[-2:]  # after the library's load, if it was sent
    if _load_refused(results):  # then the call found no function either
        raise script_failure(results[0])
    if isinstance(reply, ResponseError):
        raise script_failure(reply)
    if isinstance(reply, Exception):
        raise reply
    parsed = call.parse(reply)
    if int(acknowledged) < replicas.count:
        ids = parsed if isinstance(parsed, list) else [parsed]  # push_many or push
        raise NotReplicated([str(task_id) for task_id in ids], int(acknowledged), replicas.count)
    return parsed
