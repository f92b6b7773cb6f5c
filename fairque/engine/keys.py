"""The key schema (design section 3) and the calls of one namespace.

Every key of a namespace is ``fq:{<ns>}:<rest>``: the hash tag puts all of them in one
cluster slot, so every script is legal on Redis Cluster. A script declares the keys it
touches by their ``<rest>`` (see :mod:`fairque.engine.scripts`); :class:`Namespace`
turns those names into the keys of one namespace and builds the :class:`Call`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from fairque.engine.calls import Arg, Call
from fairque.engine.scripts import Script, load
from fairque.errors import InvalidInput

T = TypeVar("T")

_NAMESPACE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_PARAM = re.compile(r"<(\w+)>")


def namespace_prefix(namespace: str) -> str:
    """The key prefix of ``namespace``; refuses names that would break the hash tag."""
    if not _NAMESPACE.fullmatch(namespace):
        raise InvalidInput(
            "namespace",
            f"{namespace!r} must be 1 to 64 characters of letters, digits, '_', '.', ':' or '-'",
        )
    return f"fq:{{{namespace}}}:"


class Namespace:
    """One namespace's keys, and the calls of its scripts.

    Every call's ``ARGV[1]`` is the key prefix, for the keys a script makes from ids. The
    settings the scripts apply live in the namespace's ``settings`` hash, in the server
    (:mod:`fairque.engine.settings`), not in the calls.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.prefix = namespace_prefix(name)
        self._fixed: dict[str, tuple[Script, tuple[str, ...]]] = {}

    def key(self, name: str) -> str:
        """The full key of ``name`` (``ring``, ``task:<id>`` with the id filled in...)."""
        return self.prefix + name

    def lane_key(self, lane: str, name: str) -> str:
        """The full key ``name`` (``ring``, ``wakeups``...) of the lane of task name
        ``lane`` (``''``: unnamed tasks), as include/base.lua's ``lane_key`` makes it."""
        if not lane:
            return self.prefix + name
        return f"{self.prefix}lane:{len(lane.encode())}:{lane}:{name}"

    @property
    def wake_channel(self) -> str:
        """The sharded pub/sub channel the scripts publish on when tasks become ready."""
        return self.prefix + "wake"

    @property
    def ended_channel(self) -> str:
        """The sharded pub/sub channel the scripts publish the ids of ended tasks on."""
        return self.prefix + "ended"

    @property
    def abort_channel(self) -> str:
        """The sharded pub/sub channel ``cancel`` publishes the ids of running tasks it
        canceled on: the worker that runs one stops it."""
        return self.prefix + "abort"

    def call(
        self,
        script_name: str,
        args: Sequence[Arg],
        parse: Callable[[Any], T],
        params: Mapping[str, str] | None = None,
        more_keys: Iterable[str] = (),
    ) -> Call[T]:
        """The call of ``script_name`` with the namespace head and ``args``.

        ``params`` fills the ``<param>`` parts of the keys the script declares;
        ``more_keys`` are the values of its variadic key (``storage:queue:<n>...``).
        """
        if params is None and not more_keys:
            script, keys = self._fixed_keys(script_name)
        else:
            script = load(script_name)
            keys = tuple(self._fill(key, params or {}) for key in script.sent_keys)
            if script.variadic_key is not None:  # storage:queue:<n>...: its values follow
                stem = self.prefix + script.variadic_key[: script.variadic_key.index("<")]
                keys += tuple(stem + value for value in more_keys)
        return Call(script, keys, (self.prefix, *args), parse)

    def _fixed_keys(self, script_name: str) -> tuple[Script, tuple[str, ...]]:
        # The hot path (push, pop, finish): a script without parameters always gets the
        # same keys, built once.
        found = self._fixed.get(script_name)
        if found is None:
            script = load(script_name)
            found = script, tuple(self.key(name) for name in script.sent_keys)
            self._fixed[script_name] = found
        return found

    def _fill(self, name: str, params: Mapping[str, str]) -> str:
        """The key ``name`` with its ``<param>`` parts given by ``params``."""
        return self.prefix + _PARAM.sub(lambda match: params[match.group(1)], name)
