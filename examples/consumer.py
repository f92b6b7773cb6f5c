"""Run a worker for the example tasks until Ctrl-C (or SIGTERM).

    uv run python examples/consumer.py

Equivalent to ``fairque worker --tasks tasks`` run from this folder; configuration comes
from FAIRQUE_* variables (e.g. FAIRQUE_CONCURRENCY=20), see config/worker_config.yaml.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import tasks  # noqa: F401 - registers the task functions

from fairque.worker import Worker, load_config


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    Worker(load_config()).run()


if __name__ == "__main__":
    main()
