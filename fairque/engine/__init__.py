"""The engine: everything the entry points share, and no policy.

- :mod:`~fairque.engine.scripts`: the Lua scripts (``lua/<entry point>/<operation>.lua``)
  and their loader; each script declares its keys and arguments.
- :mod:`~fairque.engine.keys`: the key schema and :class:`Namespace`, which builds the
  calls of one namespace.
- :mod:`~fairque.engine.calls`: :class:`Call` (script, keys, args, parser) and codecs.
- :mod:`~fairque.engine.records`: the task hash every entry point stores, and its parser.
- :mod:`~fairque.engine.connect`, :mod:`~fairque.engine.executor`: connections from a
  URL, and the sync and async executors that send calls (clients may share one).
- :mod:`~fairque.engine.direct`, :mod:`~fairque.engine.async_direct`: a plain redis-py
  client's script calls sent straight on its connections, past redis-py's per-command
  layers (the executors use them where they can).
- :mod:`~fairque.engine.observer`: what the runners report to (the metrics implement it).
- :mod:`~fairque.engine.outage`, :mod:`~fairque.engine.waiting`: what long-running loops
  do while the server is away, and their bounded waits.

The local servers (the embedded Valkey of a first run, throwaway servers and clusters)
are in :mod:`fairque.servers`, below the engine. Entry points (``fairque.queue``,
``fairque.jobs``, ``fairque.scheduler``, ``fairque.storage``) import these public names,
never one another's private ones.
"""

from fairque.engine.async_executor import AsyncExecutor
from fairque.engine.calls import Arg, Call
from fairque.engine.executor import Executor
from fairque.engine.keys import Namespace
from fairque.engine.records import Record, RecordKind, TaskState

__all__ = [
    "Arg",
    "AsyncExecutor",
    "Call",
    "Executor",
    "Namespace",
    "Record",
    "RecordKind",
    "TaskState",
]
