"""``casewatch`` under tracemalloc, for ``bench/memory.py --tracemalloc`` (not a product entry).

Starts tracemalloc (1 frame per allocation, cheap enough to let a backlog run), then runs
``monitor.cli.main``. On SIGUSR1 it writes a snapshot to the next free name among
``early.snap`` / ``late.snap`` in ``$CASEWATCH_BENCH_SNAPSHOTS``; the bench compares them.
"""

from __future__ import annotations

import os
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _snapshot(signum: int, frame: FrameType | None) -> None:
    folder = Path(os.environ["CASEWATCH_BENCH_SNAPSHOTS"])
    for name in ("early.snap", "late.snap"):
        path = folder / name
        if not path.exists():
            tmp = path.with_suffix(".part")
            tracemalloc.take_snapshot().dump(str(tmp))
            tmp.rename(path)  # the bench waits for the final name
            return


if __name__ == "__main__":
    tracemalloc.start(1)
    signal.signal(signal.SIGUSR1, _snapshot)
    from monitor.cli import main

    sys.argv[0] = "casewatch"
    raise SystemExit(main())
