"""``fairque worker --processes N``: N worker processes for CPU-bound task functions.

Each child is a whole :class:`Worker` with its own event loop and id (``<id>-<n>``); the
parent only forwards SIGTERM / SIGINT to them and waits, so every child hands its
unfinished tasks back on its own (and a second signal stops them at once). Children are
new Python processes (``python -m fairque.runners.fair_worker.processes``) that import the task
modules themselves and get their configuration as JSON in their environment: nothing is
pickled, and nothing depends on state copied from the parent.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from types import FrameType

from fairque import logs
from fairque.errors import FairQueueError
from fairque.runners.fair_worker.config import WorkerConfig
from fairque.runners.fair_worker.hooks import load_hooks
from fairque.runners.fair_worker.runner import Worker

CHILD_ENV = "FAIRQUE_WORKER_CHILD"  # a child's configuration and task modules, as JSON
REFUSED = 2  # a child's exit status when its worker refused to start (as the CLI's)


def run_processes(
    config: WorkerConfig,
    count: int,
    modules: Sequence[str],
    log_format: str = "text",
    hooks: str | None = None,
) -> int:
    """Runs ``count`` workers in child processes, which log in ``log_format`` and load
    the ``hooks`` named (``MODULE:NAME``); returns 0 if all stopped cleanly."""
    children = []
    for n in range(1, count + 1):
        values = config.model_copy(update={"id": f"{config.id}-{n}"}).model_dump(mode="json")
        child = {"config": values, "modules": list(modules), "first": n == 1,
                 "log_format": log_format, "hooks": hooks}  # fmt: skip
        env = {**os.environ, CHILD_ENV: json.dumps(child)}
        # A session of its own: a terminal's Ctrl-C reaches the parent only, which forwards
        # it once. Reaching both, one Ctrl-C would count as two (a stop without grace).
        command = [sys.executable, "-m", "fairque.runners.fair_worker.processes"]
        children.append(subprocess.Popen(command, env=env, start_new_session=True))

    def forward(signum: int, _frame: FrameType | None) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    codes = [child.wait() for child in children]
    if all(code == 0 for code in codes):
        return 0
    return REFUSED if REFUSED in codes else 1


def main() -> None:
    """A child worker: its configuration and task modules come from ``$FAIRQUE_WORKER_CHILD``."""
    given = json.loads(os.environ[CHILD_ENV])
    # Its stop line and its word about an unreachable server go to stderr like the parent's.
    logs.setup(given["log_format"])
    sys.path.insert(0, os.getcwd())  # --tasks modules of the current directory, as the parent
    for module in given["modules"]:
        importlib.import_module(module)
    config = WorkerConfig.model_validate(given["config"])
    hooks = load_hooks(given["hooks"]) if given["hooks"] else None
    try:
        Worker(config, check_eviction=given["first"], hooks=hooks).run()
    except FairQueueError as exc:  # refused at start (a newer data format): one line
        logging.getLogger("fairque.worker").error("%s", exc)  # noqa: TRY400 - one line, no traceback
        sys.exit(REFUSED)


if __name__ == "__main__":
    main()
