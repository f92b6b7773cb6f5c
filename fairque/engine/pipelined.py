"""Calls sent in a pipeline on one connection: after ``ASKING``, or followed by ``WAIT``.

Replication is asynchronous: a master that acknowledged a push and died before sending it
to a replica loses it when the replica is promoted. ``WAIT n timeout`` blocks until ``n``
replicas have everything this connection wrote, so it must follow the script on the
connection that sent it: both go in one pipeline, to the node that ran the call (a
cluster's call is routed to its slot's primary before it is sent, so the pipeline is a
plain one to that node). ``ASKING`` (a slot being migrated: the call goes to the node
importing it) holds for the next command on its connection only, so it goes in the same
pipeline, just before the call.

When the server lacks the script's function, the pipeline is sent again with the
library's load first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from redis.exceptions import AskError, ClusterError, ReadOnlyError, ResponseError, TryAgainError

from fairque.engine.calls import Call, Replicas
from fairque.errors import NotReplicated, from_script_error

T = TypeVar("T")

# Errors that say the call went to the wrong node or the node is failing over (a
# cluster's slots moving, a demoted master's READONLY): they stay redis-py's, for the
# route to send the call elsewhere, or for the caller to try again.
FAILING_OVER = (ClusterError, TryAgainError, ReadOnlyError, AskError)


def script_failure(exc: ResponseError) -> Exception:
    """What a failed script call raises: a server in failover stays a redis-py error
    (:data:`FAILING_OVER`); an error of a fairque script becomes its own exception."""
    if isinstance(exc, FAILING_OVER):
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


@dataclass(frozen=True)
class Pipelined(Generic[T]):
    """A call sent in a pipeline: after ``ASKING`` if ``asking``, followed by ``WAIT``
    if ``replicas``; with its library's load first if ``load``."""

    call: Call[T]
    replicas: Replicas | None
    asking: bool = False
    load: bool = False

    def loading(self) -> Pipelined[T]:
        """The same pipeline, with the library's load first."""
        return Pipelined(self.call, self.replicas, self.asking, load=True)

    def commands(self) -> list[tuple[Any, ...]]:
        """The pipeline's commands, in order."""
        call = self.call
        commands: list[tuple[Any, ...]] = []
        if self.load:
            commands.append(("FUNCTION LOAD", "REPLACE", call.script.library))
        if self.asking:
            commands.append(("ASKING",))
        commands.append(("FCALL", call.script.function, len(call.keys), *call.keys, *call.args))
        if self.replicas is not None:
            wait_ms = max(1, round(self.replicas.timeout * 1000))
            commands.append(("WAIT", self.replicas.count, wait_ms))
        return commands

    def _call_reply(self, results: list[Any]) -> Any:
        return results[-2] if self.replicas is not None else results[-1]

    def _load_refused(self, results: list[Any]) -> bool:
        """True if the pipeline loaded the library and the load failed."""
        return self.load and isinstance(results[0], ResponseError)

    def needs_library(self, results: list[Any]) -> bool:
        """True if the server did not have the script's function (send the pipeline
        again, loading it first). A load refused (a demoted master's READONLY) is not
        tried again: :meth:`reply` raises its error."""
        reply = self._call_reply(results)
        if self._load_refused(results):
            return False
        return isinstance(reply, ResponseError) and function_missing(reply)

    def reply(self, results: list[Any]) -> T:
        """The parsed reply of the script; raises :class:`NotReplicated` if too few
        replicas confirmed it (the write itself stands)."""
        if self._load_refused(results):  # then the call found no function either
            raise script_failure(results[0])
        reply = self._call_reply(results)
        if isinstance(reply, ResponseError):
            raise script_failure(reply)
        if isinstance(reply, Exception):
            raise reply
        parsed = self.call.parse(reply)
        if self.replicas is not None and int(results[-1]) < self.replicas.count:
            ids = parsed if isinstance(parsed, list) else [parsed]  # push_many or push
            raise NotReplicated(
                [str(task_id) for task_id in ids], int(results[-1]), self.replicas.count
            )
        return parsed


def pipeline(client: Any, pipelined: Pipelined[Any]) -> Any:
    """A redis-py pipeline (blocking or asyncio) of ``client``, a plain client of one
    node, holding ``pipelined``'s commands."""
    pipe = client.pipeline(transaction=False)
    for command in pipelined.commands():
        pipe.execute_command(*command)
    return pipe
