"""What the outcome join pays to look for turns kept as their Kafka records' places.

Unsampled turns read from Kafka are kept a batch at a time (``retained_places``: one row per
partition per batch, the turns' ids as JSON lists, ``monitor/storage/retained_turns.py``), and
the outcome join reads every kept batch for the turns and cases its waiting outcomes name
(``find_places``) at each run while outcomes wait. This keeps ``--turns`` turns in batches of
``--batch`` on a SQLite file, then times ``--runs`` lookups of 50 turn ids and 20 conversation
ids that are not there (the worst case: every batch read and decoded), in CPU time of this
process. A quiet stream makes small batches (the keeper takes what waits every half second),
a busy one batches of up to 1,000.

``--found N`` looks for N turns that are kept instead (every turn at an even stride, as
feedback on every tenth turn asks for them), so the lookup also copies each into
``retained_turns``: what a run of the outcome join pays when that much feedback waits. Each
run copies into a fresh copy of the kept batches (the copy is left out of the time).

    .venv/bin/python bench/place_lookup.py [--turns 100000] [--batch 25] [--runs 5]
    .venv/bin/python bench/place_lookup.py --turns 300000 --batch 1000 --found 30000

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

import sqlalchemy as sa  # noqa: E402

from monitor.storage.retained_turns import PlaceBatch, RetainedTurns, find_places  # noqa: E402
from monitor.storage.store import Store  # noqa: E402
from monitor.storage.tables import retained_turns  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=25)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--found", type=int, default=0, help="look for this many kept turns")
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
        kept_turns = batches * args.batch
        if args.found:
            stride = max(1, kept_turns // args.found)
            turn_ids = {
                f"evt-{t // args.batch:06d}-{t % args.batch:04d}-5f0c2a7e9b"
                for t in range(0, kept_turns, stride)
            }
            cases: set[str] = set()
            asked = f"{len(turn_ids)} kept turns"
        else:
            turn_ids = {f"missing-{i}" for i in range(50)}
            cases = {f"conv-missing-{i}" for i in range(20)}
            asked = "50 turns and 20 cases"
        times = []
        for _ in range(args.runs):
            with store.transaction(write=True) as conn:  # each run copies them anew
                conn.execute(sa.delete(retained_turns))
            started = time.process_time()
            with store.transaction(write=True) as conn:
                found = find_places(conn, store, turn_ids, cases)
            times.append((time.process_time() - started) * 1000)
            assert found == (len(turn_ids) if args.found else 0)
        store.close()
    median = statistics.median(times)
    print(
        f"{kept_turns} turns kept in {batches} batches of {args.batch}: one lookup "
        f"of {asked}, median of {args.runs}: {median:.1f} ms of CPU"
    )
    print(
        json.dumps(
            {
                "bench": "place_lookup",
                "turns": batches * args.batch,
                "batch": args.batch,
                "found": args.found,
                "runs": args.runs,
                "lookup_cpu_ms_median": round(median, 1),
                "lookup_cpu_ms": [round(t, 1) for t in times],
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
