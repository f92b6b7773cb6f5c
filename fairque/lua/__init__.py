"""Loads the Lua scripts: one file per operation, shared helpers included at load time.

A line ``--@include name`` is replaced by ``include/name.lua`` (each helper once per
script, its own includes first). Scripts are sent by SHA-1 and loaded on NOSCRIPT.
Every script receives the namespace's fixed keys; a script that needs more (the
scheduler's) names them when loaded, and they follow the fixed keys in KEYS.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from fairque.keys import FIXED_KEYS

_INCLUDE = re.compile(r"^--@include (\w+)$", re.MULTILINE)


@dataclass(frozen=True)
class Script:
    """A script ready to send: its name, full source and SHA-1."""

    name: str
    source: str
    sha: str


def _read(path: str) -> str:
    return resources.files(__package__).joinpath(path).read_text(encoding="utf-8")


def _expand(text: str, included: set[str]) -> str:
    def include(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in included:
            return ""
        included.add(name)
        return _expand(_read(f"include/{name}.lua"), included)

    return _INCLUDE.sub(include, text)


def _keys_header(extra_keys: tuple[str, ...]) -> str:
    names = (*FIXED_KEYS, *extra_keys)
    pairs = ", ".join(f"[{name!r}] = KEYS[{i}]" for i, name in enumerate(names, 1))
    # Keys sent after the named ones (seed 004's per-queue keys) start at
    # KEYS[NAMED_KEY_COUNT + 1].
    return f"local K = {{{pairs}}}\nlocal NAMED_KEY_COUNT = {len(names)}\n"


@cache
def load(name: str, extra_keys: tuple[str, ...] = ()) -> Script:
    """The script ``lua/<name>.lua`` with its includes expanded; ``extra_keys`` names the
    keys it receives after the fixed ones."""
    source = _keys_header(extra_keys) + _expand(_read(f"{name}.lua"), set())
    return Script(name, source, hashlib.sha1(source.encode()).hexdigest())  # noqa: S324
