"""What the outcome join pays to look for turns kept as their Kafka records' places.

Unsampled turns read from Kafka are kept a batch at a time (``retained_places``: one row per
partition per batch, the turns' ids as JSON lists, ``monitor/storage/retained_turns.py``), and
the outcome join reads every kept batch for the turns and cases its waiting outcomes name
(``find_places``) at each run while outcomes wait. This keeps ``--turns`` turns in batches of
``--batch`` on a SQLite file, then times ``--runs`` lookups of 50 turn ids and 20 conversation
ids that are not there (the worst case: every batch read and decoded), in CPU time of this
process. A quiet stream makes small batches (the keeper takes what waits every half second),
a busy one batches of up to 1,000.

    .venv/bin/python bench/place_lookup.py [--turns 100000] [--batch 25] [--runs 5]

Prints a readable report, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from monitor.storage.retained_turns import PlaceBatch, RetainedTurns, find_places  # noqa: E402
from monitor.storage.store import Store  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=25)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'places.db'}")
        store.migrate()
        kept = RetainedTurns(store)
        batches = max(1, args.turns // args.batch)
        for b in range(batches):
            ids = [f"evt-{b:06d}-{i:04d}-5f0c2a7e9b" for i in range(args.batch)]
            kept.retain(
                [],
                places=[
                    PlaceBatch(
                        "turns",
                        b % 4,
                        ids,
                        [f"conv-{e}" for e in ids],
                        ["helpdesk"] * len(ids),
                        list(range(b * args.batch, (b + 1) * args.batch)),
                    )
                ],
            )
        turn_ids = {f"missing-{i}" for i in range(50)}
        cases = {f"conv-missing-{i}" for i in range(20)}
        times = []
        for _ in range(args.runs):
            started = time.process_time()
            with store.transaction(write=True) as conn:
                found = find_places(conn, store, turn_ids, cases)
            times.append((time.process_time() - started) * 1000)
            assert found == 0
        store.close()
    median = statistics.median(times)
    print(
        f"{batches * args.batch} turns kept in {batches} batches of {args.batch}: one lookup "
        f"of 50 turns and 20 cases, median of {args.runs}: {median:.1f} ms of CPU"
    )
    print(
        json.dumps(
            {
                "bench": "place_lookup",
                "turns": batches * args.batch,
                "batch": args.batch,
                "runs": args.runs,
                "lookup_cpu_ms_median": round(median, 1),
                "lookup_cpu_ms": [round(t, 1) for t in times],
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
