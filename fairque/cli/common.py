"""What every ``fairque`` command shares: options, messages, and how a command fails
(what it lists: :mod:`fairque.cli.listing`; where it listens: :mod:`fairque.cli.serving`).

A command that fails prints one line on stderr (``error: ...``) and exits with 2, with
no traceback, whatever went wrong: a bad option, an unreachable server, a refused
password, a bug. ``fairque --debug ...`` (or ``FAIRQUE_DEBUG=1``) shows the traceback.
Long-running commands say on stderr where they run when they start (:func:`announce`)
and what they did when they stop, so stdout stays for what a script reads.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import json
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from redis.exceptions import AuthenticationError, InvalidResponse, ResponseError
from rich.console import Console
from rich.markup import escape

from fairque import logs
from fairque.config import URL_ENV, redis_url
from fairque.engine import settings as settings_store
from fairque.engine.connect import sync_client
from fairque.engine.executor import Executor
from fairque.engine.keys import Namespace
from fairque.engine.outage import OUTAGE, server_label
from fairque.engine.settings import DATA_FORMAT
from fairque.engine.shards import shard_namespaces
from fairque.errors import FairQueueError, NewerDataFormat, ServerTimeout, ServerUnavailable
from fairque.queue.client import FairQueue, ShardedQueue, open_queue

console = Console()
errors = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])

DEBUG_ENV = "FAIRQUE_DEBUG"
NAMESPACE_ENV = "FAIRQUE_NAMESPACE"
SHARDS_ENV = "FAIRQUE_SHARDS"
TOKEN_ENV = "FAIRQUE_MASTER_TOKEN"  # noqa: S105 - the variable's name, not a token

URL_OPTION = typer.Option(
    None,
    "--url",
    envvar=URL_ENV,
    metavar="URL",
    help="Server URL: redis://, rediss://, unix://, redis+cluster://, rediss+cluster://, "
    "redis+sentinel:// or rediss+sentinel:// (default: the embedded Valkey).",
)
NAMESPACE_OPTION = typer.Option(
    "default", "--namespace", envvar=NAMESPACE_ENV, metavar="NAME", help="Queue namespace."
)
SHARDS_OPTION = typer.Option(
    1,
    "--shards",
    min=1,
    max=1024,
    envvar=SHARDS_ENV,
    metavar="N",
    help="Shards of a sharded queue (1: not sharded).",
)
TOKEN_OPTION = typer.Option(
    None,
    "--token",
    envvar=TOKEN_ENV,
    metavar="TOKEN",
    help="Bearer token (required off loopback).",
)
METRICS_PORT_OPTION = typer.Option(
    None,
    "--metrics-port",
    min=0,
    max=65535,
    metavar="PORT",
    help="Serve Prometheus metrics on PORT of --monitoring-host (0: any free port).",
)
HEALTH_PORT_OPTION = typer.Option(
    None,
    "--health-port",
    min=0,
    max=65535,
    metavar="PORT",
    help="Answer /livez and /readyz on PORT of --monitoring-host (0: any free port); "
    "--metrics-port answers them too.",
)
MONITORING_HOST_OPTION = typer.Option(
    "127.0.0.1",
    "--monitoring-host",
    metavar="HOST",
    help="Address --metrics-port and --health-port listen on: 0.0.0.0 in a container, "
    "for Prometheus and the kubelet, which reach the pod's address (metrics and probes "
    "carry no secret).",
)
TENANT_NAMES = ("--tenant", "--user", "-u")  # --user: what the Python API calls user_id
JSON_OPTION = typer.Option(False, "--json", help="Print JSON (for scripts) instead of a table.")
HOST_HELP = "Address to bind (anything but loopback needs a token)."


def _plain_arguments() -> None:
    """typer (0.29) prints each positional argument's Python type beside it in help
    ("ID <str>"); an argument with a metavar already says what it takes. A test of every
    command's help holds this (it fails if typer changes the method's name)."""
    argument: Any = typer.core.TyperArgument
    typed = argument.display_type_rich

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        return None if self.metavar else typed(self, ctx)

    argument.display_type_rich = display_type_rich
    # typer 0.29 writes a required argument as "{ID}" in usage lines; click writes "ID".
    usage_name = argument._usage_display_name

    def _usage_display_name(self: Any) -> str:
        return str(usage_name(self)).replace("{", "").replace("}", "")

    argument._usage_display_name = _usage_display_name


_plain_arguments()


def first_sentence(text: str | None) -> str:
    """The first sentence of a docstring, on one line: a command's line in its group's
    help, whole (click would cut it at ~45 characters)."""
    paragraph = " ".join((text or "").strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[: end + 1]


def finish_help(app: typer.Typer, examples: dict[str, tuple[str, ...]], path: str = "") -> None:
    """Gives every command of ``app`` (and its groups) a whole first sentence in its
    group's list, and the ``examples`` of its path under its ``--help``."""
    for info in app.registered_commands:
        callback = info.callback
        name = info.name or (callback.__name__.replace("_", "-") if callback else "")
        if info.short_help is None and callback is not None:
            info.short_help = first_sentence(callback.__doc__)
        if lines := examples.get(f"{path}{name}"):
            info.epilog = "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
    for group in app.registered_groups:
        inner = group.typer_instance
        if inner is None:
            continue
        if not isinstance(group.short_help, str):  # typer's Default(None): not given
            group.short_help = first_sentence(str(inner.info.help or ""))
        finish_help(inner, examples, f"{path}{group.name} ")


class State:
    """Global options, set by the ``fairque`` callback (and ``--log-format``) before a
    command runs."""

    debug = False
    log_format = "text"


def _json_line(level: str, message: str) -> bool:
    """Writes the line as JSON if ``--log-format json`` chose it; True if it did."""
    if State.log_format != "json":
        return False
    print(logs.json_line(level, "fairque.cli", message), file=sys.stderr, flush=True)
    return True


def fail(message: str) -> typer.Exit:
    """Prints ``message`` as the command's one-line error; raise what it returns (exit 2)."""
    if not _json_line("error", message):
        errors.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True, highlight=False)
    return typer.Exit(2)


def warn(message: str) -> None:
    """Prints a one-line warning on stderr."""
    if not _json_line("warning", message):
        errors.print(
            f"[yellow]warning:[/yellow] {escape(message)}", soft_wrap=True, highlight=False
        )


def say(message: str) -> None:
    """Prints a line about the command itself (start, stop) on stderr."""
    if not _json_line("info", message):
        errors.print(message, soft_wrap=True, highlight=False, markup=False)


def one_line(exc: object) -> str:
    """An error's text on one line (its type's name when it has none)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def explain(exc: BaseException) -> str:
    """The one line that says what went wrong, for an exception a command let through."""
    text = str(exc)
    # NOAUTH (redis-py raises it as an AuthenticationError without its code), or (RESP3)
    # a HELLO refused before authenticating: no password was given.
    if isinstance(exc, (AuthenticationError, ResponseError)) and (
        text.startswith(("NOAUTH", "Authentication required")) or "already authenticated" in text
    ):
        return (
            "the server requires a password: give it in the URL "
            "(redis://:PASSWORD@host:port or redis://USER:PASSWORD@host:port)"
        )
    if isinstance(exc, AuthenticationError) or (
        isinstance(exc, ResponseError) and text.startswith(("WRONGPASS", "NOPERM"))
    ):
        return f"the server refused the credentials in the URL ({one_line(exc)})"
    if isinstance(exc, InvalidResponse):  # an answer that is no RESP: another service's port
        return (
            f"the server at --url does not speak the Redis protocol ({one_line(exc)}): "
            "is it the Redis or Valkey port, not an HTTP one (the master's)?"
        )
    if isinstance(exc, OUTAGE) and not isinstance(exc, ServerTimeout):
        said = exc if isinstance(exc, ServerUnavailable) else f"cannot reach the server ({exc})"
        return f"{one_line(said)}; is it running, and is --url (or ${URL_ENV}) right?"
    if isinstance(exc, FairQueueError):
        return one_line(exc)
    return f"{type(exc).__name__}: {one_line(exc)} (run with --debug for the traceback)"


def explained(command: F) -> F:
    """Wraps a command so that whatever it raises ends it with one line and exit 2."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException, KeyboardInterrupt):
            raise
        except Exception as exc:
            if State.debug:
                raise
            raise fail(explain(exc)) from None

    return run  # type: ignore[return-value]


@dataclasses.dataclass(frozen=True)
class QueueTarget:
    """The queue a command acts on, as its ``--url``, ``--namespace`` and ``--shards``
    name it; :meth:`open` connects (a command checks its other input first)."""

    url: str | None
    namespace: str
    shards: int

    def open(self) -> FairQueue | ShardedQueue:
        return open_queue(self.url, self.namespace, self.shards)

    def open_to_read(self, looked_up: str | None = None) -> FairQueue | ShardedQueue:
        """:meth:`open` for a command that only reads, after :func:`require_data`."""
        require_data(self.url, self.namespace, self.shards, looked_up)
        return self.open()


def on_queue(command: Callable[..., None]) -> Callable[..., None]:
    """Declares the ``--url``, ``--namespace`` and ``--shards`` options of a command on
    one queue (after its own options, before ``--json``) and hands them to it as its
    first parameter, a :class:`QueueTarget`."""
    _, *own = inspect.signature(command).parameters.values()
    last = next((i for i, p in enumerate(own) if p.name == "as_json"), len(own))
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    options = [
        inspect.Parameter("url", kind, default=URL_OPTION, annotation=str | None),
        inspect.Parameter("namespace", kind, default=NAMESPACE_OPTION, annotation=str),
        inspect.Parameter("shards", kind, default=SHARDS_OPTION, annotation=int),
    ]

    @functools.wraps(command)
    def run(url: str | None, namespace: str, shards: int, **given: Any) -> None:
        command(QueueTarget(url, namespace, shards), **given)

    run.__dict__["__signature__"] = inspect.Signature([*own[:last], *options, *own[last:]])
    run.__annotations__ = {
        **command.__annotations__,
        **{option.name: option.annotation for option in options},
    }
    return run


class Typer(typer.Typer):
    """A command group whose commands fail in one line (see :func:`explained`)."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[[F], F]:
        register = super().command(*args, **kwargs)

        def decorate(command: F) -> F:
            register(explained(command))
            return command

        return decorate


def setup_logging() -> None:
    """Shows the INFO lines of fairque's long-running loops on stderr (a worker's stop
    line, a lost server and its return), warnings marked as such, in the format
    ``--log-format`` chose."""
    logs.setup(State.log_format)


def _choose_log_format(value: str) -> str:
    if value not in logs.FORMATS:
        raise typer.BadParameter(f"{value!r}: use text or json")
    State.log_format = value
    return value


LOG_FORMAT_OPTION = typer.Option(
    "text",
    "--log-format",
    envvar="FAIRQUE_LOG_FORMAT",
    metavar="text|json",
    is_eager=True,  # chosen before any other option can fail and say so
    callback=_choose_log_format,
    help="Log lines as text, or one JSON object per line (time, level, message, and the "
    "task's id, tenant, name and attempt where a line concerns a task).",
)


def parse_json(text: str | None, option: str) -> Any:
    """The JSON value an option holds (None stays None); a clear error if it is not JSON."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"{option}: not valid JSON ({exc})") from None


def parse_json_list(text: str | None, option: str) -> list[Any] | None:
    """A JSON list of positional arguments, e.g. ``'["alice", 3]'``."""
    value = parse_json(text, option)
    if value is not None and not isinstance(value, list):
        raise fail(f"{option}: must be a JSON list, e.g. '[\"alice\", 3]', got {text}")
    return value


def parse_json_object(text: str | None, option: str) -> dict[str, Any] | None:
    """A JSON object of keyword arguments, e.g. ``'{"pages": 3}'``."""
    value = parse_json(text, option)
    if value is not None and not isinstance(value, dict):
        raise fail(f"{option}: must be a JSON object, e.g. '{{\"pages\": 3}}', got {text}")
    return value


def import_module(module: str, option: str) -> Any:
    """Imports ``module`` (so that its ``@task`` functions register themselves), from the
    current directory too, as celery and rq do: ``--tasks tasks`` next to ``tasks.py``."""
    if module.endswith(".py") or os.sep in module or module.startswith("."):
        name = os.path.basename(module).removesuffix(".py")
        raise fail(
            f"{option} {module}: give a module's name, not a file: {option} {name} from the "
            "folder that holds it (or a dotted name such as myapp.tasks)"
        )
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise fail(
            f"{option} {module}: {exc} (looked in {here} and the installed packages)"
        ) from None


def server_name(url: str | None) -> str:
    """How a start line names the server: the URL (without password), or the embedded
    Valkey and its socket. Resolving the embedded one starts it if needed."""

    if url or os.environ.get(URL_ENV):
        return server_label(redis_url(url))
    return f"the embedded Valkey ({redis_url(None)})"


def unreachable(url: str | None) -> str | None:
    """Why the server at ``url`` does not answer PING now; None when it does."""

    try:
        client = sync_client(redis_url(url), socket_connect_timeout=2, socket_timeout=2)
        try:
            client.ping()
        finally:
            client.close()
    except FairQueueError:
        raise
    except Exception as exc:
        return explain(exc)
    return None


def namespaces_of(namespace: str, shards: int) -> list[Namespace]:
    """The namespaces of a queue: its own, or each shard's."""
    names = shard_namespaces(namespace, shards) if shards > 1 else [namespace]
    return [Namespace(name) for name in names]


def require_data(
    url: str | None, namespace: str, shards: int = 1, looked_up: str | None = None
) -> None:
    """Ends a command that only reads, before any client writes, if no client ever wrote
    to the namespace (a client records the data format at its first call, so a read
    would leave a key in a mistyped namespace, and show zeros): a list says so on stderr
    and exits 0; a lookup of ``looked_up`` (``task ID``) fails, exit 2."""
    executor = Executor.connect(url)
    try:
        used = any(executor.execute(settings_store.written(each))
                   for each in namespaces_of(namespace, shards))  # fmt: skip
    finally:
        executor.close()
    if used:
        return
    empty = f"namespace {namespace} holds no data (is --namespace right?)"
    if looked_up is not None:
        raise fail(f"no {looked_up}: {empty}")
    warn(empty)
    raise typer.Exit(0)


def refuse_newer_format(url: str | None, namespace: str, shards: int = 1) -> None:
    """Ends a service's start in one line if its namespace holds data of a newer format
    than this release reads (a client would refuse at its first call)."""
    executor = Executor.connect(url)
    try:
        for each in namespaces_of(namespace, shards):
            found = executor.execute(settings_store.data_format(each))
            if found is not None and found > DATA_FORMAT:
                raise fail(str(NewerDataFormat(each.name, found, DATA_FORMAT)))
    finally:
        executor.close()


def announce(command: str, *facts: str) -> None:
    """The start line of a long-running command: what it is, where, and how to stop it."""
    say(f"fairque {command}: " + "; ".join(fact for fact in facts if fact) + " (Ctrl-C stops)")
