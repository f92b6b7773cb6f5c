"""Push work for a few users: one of them pushes much more than the others.

    uv run python examples/producer.py          # then, in another shell:
    uv run python examples/consumer.py

With no FAIRQUE_REDIS_URL both use the embedded Valkey of $FAIRQUE_HOME, so the two
processes share one queue.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from tasks import checksum, render_report

from fairque import FairQueue, Priority


def main() -> None:
    with FairQueue() as queue:
        heavy = [render_report.build(user_id="acme", kwargs={"user": "acme", "pages": 3})
                 for _ in range(200)]  # fmt: skip
        light = [checksum.build(user_id=user, args=[user], priority=Priority.HIGH)
                 for user in ("alice", "bob", "carol") for _ in range(5)]  # fmt: skip
        urgent = render_report.build(user_id="acme", kwargs={"user": "acme", "pages": 1},
                                     priority=Priority.CRITICAL, keep_result=True)  # fmt: skip
        queue.push_many(heavy)
        queue.push_many(light)
        urgent_id = queue.push(urgent)
        print(f"pushed {len(heavy) + len(light) + 1} tasks; the critical one is {urgent_id}")


if __name__ == "__main__":
    main()
