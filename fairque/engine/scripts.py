"""Loads the Lua scripts: one file per operation, grouped by entry point, with shared
helpers included at load time.

A script is named by its path under ``lua/`` without ``.lua`` (``queue/push``). A line
``--@include name`` is replaced by ``include/name.lua`` (each helper once per script, its
own includes first). Scripts are sent by SHA-1 and loaded on NOSCRIPT.

An include is a module: a file names only the includes it uses itself, and an include's
per-call state (a variable not named in capitals) is read and written there alone, other
code calling its functions (``tests/test_lua.py`` holds both). What a call gathers for its
end is written by a chain of flushes, each include's writing its own and calling the one
below: ``flush`` (ending.lua, with ready.lua's), ``flush_counts`` (figures.lua),
``flush_writes`` (writes.lua); a script returns through the narrowest that covers it.

Every script declares in its header the keys it touches, in the order the caller sends
them, and its arguments in the numbering its code uses::

    -- KEYS: ring ready stats clock task:<id> storage:queue:<n>...
    -- FLAGS: no-writes
    -- ARGV[1..5] the namespace head (include/base.lua)
    -- ARGV[6] the task id
    -- ARGV[7..] the payloads

Key names are relative to the namespace's prefix (``fq:{ns}:``), so every key is under
its hash tag. A ``<param>`` part is filled in by the caller (one task, one schedule); a
final ``...`` means any number of such keys follow. The loader gives the declared keys
names inside Lua: ``K.ring``, ``K['state:failed']``, ``K.task`` for ``task:<id>``; the
variadic keys are ``KEYS[KEY_COUNT + 1]`` onwards.

A call sends only the keys the script cannot make itself (:attr:`Script.sent_keys`): those
with a ``<param>``, or the first declared key when none has one (the server, a cluster's
client, routes a call by its keys). A fixed key (``ring``, ``stats``) is made from the
prefix the first time the script reads it: each key sent cost the server ~0.9k
instructions per call and the client a walk over one more argument, and a pop declares
19 keys and reads a few of them when it finds nothing. An optional ``-- FLAGS:`` line gives
the function's flags: ``no-writes`` for a script that only reads, so that it still runs
on a server out of memory (a function without flags is refused there before it starts).

Each script is sent as a function of its own library (``FUNCTION LOAD`` once, then
``FCALL``): an ``EVAL`` makes every helper's closure anew on each call, which cost push
~10 us of a 54 us call, while a library makes them once. The library runs every other
top-level definition (``local counts = {}``, ``local PREFIX = ARGV[1]``) again at the start
of each call, so each call starts from the state an ``EVAL`` of :attr:`Script.source`
would, and a script's state never leaks into the next call. What a library keeps is only
derived from a namespace's prefix (``KEY_NAMES``: its key names) or constant.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from fairque.engine.fields import ROWS

_INCLUDE = re.compile(r"^--@include (\w+)$", re.MULTILINE)
_KEYS = re.compile(r"^-- KEYS:(.*)$", re.MULTILINE)
_FLAGS = re.compile(r"^-- FLAGS:(.*)$", re.MULTILINE)
FLAGS = frozenset({"no-writes"})  # the function flags a script may declare
_ARGV = re.compile(r"^-- ARGV\[(\d+)(\.\.(\d*))?\]", re.MULTILINE)
_PARAM = re.compile(r":<\w+>$")
_ROW_CONSTANT = re.compile(r"\b(" + "|".join(ROWS) + r")\.(\w+)\b")


@dataclass(frozen=True)
class Script:
    """A script ready to send: its name, full source, SHA-1 and declared interface."""

    name: str
    source: str  # the script as one chunk, for EVAL (what the library's function runs)
    sha: str
    function: str  # the name FCALL takes, made from the library's SHA-1
    library: str  # the code FUNCTION LOAD takes: a library holding that one function
    keys: tuple[str, ...]  # declared key names, in their order (``task:<id>`` kept as is)
    sent_keys: tuple[str, ...]  # those a call sends, in KEYS order (the module's docstring)
    flags: tuple[str, ...]  # the function's flags (``no-writes``)
    variadic_key: str | None  # the name of the keys that may follow them, if any
    arg_count: int  # ARGV entries the header numbers one by one
    variadic_args: bool  # True if any number more may follow (``ARGV[n..]``)


def _read(path: str) -> str:
    """A Lua file, with the field tables' constants (``PUSH_ROW.priority``) written in
    (:mod:`fairque.engine.fields`)."""
    text = (resources.files(__package__) / "lua" / path).read_text(encoding="utf-8")
    return _ROW_CONSTANT.sub(lambda found: ROWS[found[1]].lua(found[2]), text)


def _expand(text: str, included: set[str]) -> str:
    def include(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in included:
            return ""
        included.add(name)
        return _expand(_read(f"include/{name}.lua"), included)

    return _INCLUDE.sub(include, text)


_DEFINITION = re.compile(r"^local\s+(?:function\s+(\w+)|([\w\s,]+?)\s*=)")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_COMMENT = re.compile(r"--[^\n]*")


def _definitions(library: str) -> list[tuple[set[str], str]]:
    """The helpers' top-level definitions, in order: (names defined, text). A definition
    starts at a line beginning ``local`` and runs to the next one; comments go with
    the definition they follow."""
    units: list[tuple[set[str], str]] = []
    for chunk in re.split(r"(?m)^(?=local\s)", library):
        found = _DEFINITION.match(chunk)
        if found is None:  # a file's header comments, before its first definition
            continue
        function, variables = found.groups()
        names = {function} if function else {name.strip() for name in variables.split(",")}
        units.append((names, chunk))
    return units


def _used_helpers(library: str, body: str) -> str:
    """The definitions of ``library`` that ``body`` needs, directly or through other
    definitions, in their order. Every ``local function`` of a script is a closure made
    anew on each call (with its upvalues bound), so a helper a script never calls would
    cost every call of it about a microsecond for nothing."""
    units = _definitions(library)
    needed = set(_IDENTIFIER.findall(_COMMENT.sub("", body)))
    kept = [False] * len(units)
    changed = True
    while changed:
        changed = False
        for i in range(len(units) - 1, -1, -1):
            names, text = units[i]
            if not kept[i] and names & needed:
                kept[i] = changed = True
                needed |= set(_IDENTIFIER.findall(_COMMENT.sub("", text)))
    return "".join(text for (_, text), keep in zip(units, kept, strict=True) if keep)


def _helpers_and_body(text: str) -> tuple[str, str]:
    """The helper definitions a script uses (a script's ``--@include`` lines come before
    its code), and its own code."""
    library = _expand("".join(m.group(0) + "\n" for m in _INCLUDE.finditer(text)), set())
    body = _INCLUDE.sub("", text)
    return _used_helpers(library, body), body


def expand(text: str) -> str:
    """A script's source with its includes: the helper definitions it uses, then its own
    code."""
    return "".join(_helpers_and_body(text))


_LOCAL = re.compile(r"^local\s+")
_CONSTANT = re.compile(r"[A-Z][A-Z0-9_]*")


def function_library(
    keys: tuple[str, ...], helpers: str, body: str, flags: tuple[str, ...] = ()
) -> tuple[str, str]:
    """The function name and ``FUNCTION LOAD`` code of a script. Helper functions, and
    constants (names in capitals whose values call nothing and use no call's keys,
    arguments or state; a library's loading may not call Lua's libraries), are made
    once, when the library loads; the other definitions are declared there and assigned
    at the start of each call, in their order, before the script's code."""
    functions: list[str] = []
    constants: list[str] = []
    state_names: list[str] = []
    state: list[str] = []
    per_call = {"K", "KEYS", "ARGV"}
    for names, text in _definitions(helpers):
        if text.startswith("local function"):
            functions.append(text)
        elif (
            all(_CONSTANT.fullmatch(name) for name in names)
            and "(" not in _COMMENT.sub("", text)
            and not per_call & set(_IDENTIFIER.findall(_COMMENT.sub("", text)))
        ):
            constants.append(text)
        else:
            state_names.extend(sorted(names) if len(names) > 1 else names)
            per_call.update(names)
            state.append(_LOCAL.sub("", text, count=1))
    if len(set(state_names)) != len(state_names):
        raise ValueError(f"a helper variable is defined twice: {state_names}")
    declared = "".join(f"local {name}\n" for name in state_names)
    starts = _state_starts(state, {*state_names, *per_call, "NAMESPACE", "KEY_COUNT"})
    code = (
        "local KEYS, ARGV, NAMESPACE, K, KEY_COUNT\n"
        + KEY_NAMES
        + declared
        + "".join(constants)
        + "".join(functions)
        + f"local STARTS = {{{','.join(starts)}}}\n"
        + "local function run(keys, args)\n"
        + "KEYS, ARGV = keys, args\n"
        + _LOCAL.sub("", _prelude(keys)).replace("\nlocal ", "\n")
        + "".join(f"STARTS[{i}]()\n" for i in range(1, len(starts) + 1))
        + body
        + "\nend\n"
    )
    listed = ", ".join(f"'{flag}'" for flag in flags)
    flagged = f"flags = {{{listed}}}"
    name = "fq_" + hashlib.sha1((code + flagged).encode()).hexdigest()  # noqa: S324 - a content name
    register = f"{{function_name = '{name}', callback = run, {flagged}}}"
    return name, f"#!lua name={name}\n{code}redis.register_function{register}\n"


# Lua 5.1 allows a function 60 upvalues (its library's locals it uses). The per-call state
# is set by functions of at most this many, called in turn at the start of each call
# (two Lua calls cost ~0.3k instructions): set in the call's own function, each variable
# was one of its upvalues, and a script reaching many includes did not load.
STATE_UPVALUES = 48


def _state_starts(state: list[str], library_locals: set[str]) -> list[str]:
    """The functions setting a call's state, the assignments of ``state`` in order, each
    using at most :data:`STATE_UPVALUES` of ``library_locals``."""
    chunks: list[tuple[set[str], list[str]]] = []
    for text in state:
        used = library_locals & set(_IDENTIFIER.findall(_COMMENT.sub("", text)))
        if not chunks or len(chunks[-1][0] | used) > STATE_UPVALUES:
            chunks.append((set(), []))
        chunks[-1][0].update(used)
        chunks[-1][1].append(text)
    return [f"function()\n{''.join(texts)}end\n" for _, texts in chunks]


def lua_name(key: str) -> str:
    """The name a declared key has in the script's ``K`` table (``task:<id>`` -> ``task``)."""
    return _PARAM.sub("", key)


def _declared_keys(name: str, text: str) -> tuple[tuple[str, ...], str | None]:
    found = _KEYS.findall(text)
    if len(found) != 1:
        raise ValueError(f"script {name} must declare its keys in one '-- KEYS:' line")
    keys = found[0].split()
    variadic = keys.pop()[:-3] if keys and keys[-1].endswith("...") else None
    return tuple(keys), variadic


def declared_flags(name: str, text: str) -> tuple[str, ...]:
    found = _FLAGS.findall(text)
    if len(found) > 1:
        raise ValueError(f"script {name} must declare its flags in at most one '-- FLAGS:' line")
    flags = tuple(found[0].split()) if found else ()
    unknown = set(flags) - FLAGS
    if unknown:
        raise ValueError(f"script {name} declares unknown flags {sorted(unknown)}")
    return flags


def _declared_args(name: str, text: str) -> tuple[int, bool]:
    numbers: list[int] = []
    variadic = False
    for first, rest, last in _ARGV.findall(text):
        if variadic:
            raise ValueError(f"script {name}: nothing may follow its ARGV[n..] line")
        if rest and not last:  # ARGV[n..]: any number from n on
            variadic = True
            numbers.append(int(first))  # checked in sequence below, then not counted
            continue
        numbers.extend(range(int(first), int(last or first) + 1))
    if numbers != list(range(1, len(numbers) + 1)):
        raise ValueError(f"script {name} must number its ARGV lines 1, 2, 3... in order")
    return len(numbers) - variadic, variadic


# What a call needs of its namespace that depends on the prefix alone: the fixed keys (a
# key a script did not get sent is made from the prefix when first read) and the lanes'
# key prefixes (include/base.lua). A library's upvalues live as long as it is loaded, so
# these are made once per namespace, not once per call: making a key cost a call ~2.5k
# server instructions, and an empty pop reads eight. At most 32 namespaces are kept; past
# that the cache starts again (what it holds is only ever derived from the prefix).
# (Its cache is local to a block: a library's main function may have 200 locals.)
KEY_NAMES = """\
local namespace_of
do
  local namespaces, namespaces_kept = {}, 0
  function namespace_of(prefix)
    local namespace = namespaces[prefix]
    if namespace == nil then
      if namespaces_kept >= 32 then namespaces, namespaces_kept = {}, 0 end
      local keys = setmetatable({}, {__index = function(made, name)
        local key = prefix .. name
        made[name] = key
        return key
      end})
      namespace = {keys = keys, view = {__index = keys}, lanes = {}, lanes_kept = 0,
        figures_minute = false, figures_prefix = false}
      namespaces[prefix], namespaces_kept = namespace, namespaces_kept + 1
    end
    return namespace
  end
end
"""


def sent_keys(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The declared keys a call sends: those with a ``<param>``, else the first."""
    with_params = tuple(key for key in keys if _PARAM.search(key))
    return with_params or keys[:1]


def _prelude(sent: tuple[str, ...]) -> str:
    """``K``: the keys sent, then (``__index``) the namespace's fixed keys. A script that
    is sent only its first fixed key (for routing) reads them all from the namespace."""
    if not any(_PARAM.search(key) for key in sent):
        keys = "local K = NAMESPACE.keys\n"
    else:
        pairs = ", ".join(f"[{lua_name(key)!r}] = KEYS[{i}]" for i, key in enumerate(sent, 1))
        keys = f"local K = setmetatable({{{pairs}}}, NAMESPACE.view)\n"
    return f"local NAMESPACE = namespace_of(ARGV[1])\n{keys}local KEY_COUNT = {len(sent)}\n"


@cache
def load(name: str) -> Script:
    """The script ``lua/<name>.lua`` with its includes expanded."""
    text = _read(f"{name}.lua")
    keys, variadic_key = _declared_keys(name, text)
    arg_count, variadic_args = _declared_args(name, text)
    flags = declared_flags(name, text)
    helpers, body = _helpers_and_body(text)
    sent = sent_keys(keys)
    source = KEY_NAMES + _prelude(sent) + helpers + body
    sha = hashlib.sha1(source.encode()).hexdigest()  # noqa: S324 - the server's script id
    function, library = function_library(sent, helpers, body, flags)
    return Script(
        name,
        source,
        sha,
        function,
        library,
        keys,
        sent,
        flags,
        variadic_key,
        arg_count,
        variadic_args,
    )


def names() -> list[str]:
    """Every script's name (``group/operation``), sorted."""
    root = resources.files(__package__) / "lua"
    return sorted(
        f"{group.name}/{entry.name[:-4]}"
        for group in root.iterdir()
        if group.is_dir() and group.name != "include"
        for entry in group.iterdir()
        if entry.name.endswith(".lua")
    )
