"""Failure modes: how well the grouping recovers planted causes, how many turns a new cause
needs before it is surfaced, and the grouping's time and memory at 10k and 100k failed turns.

Turns come from ``tests/support/planted_failures.py``: K planted modes (each a cause worded
several ways by the judge, with random codes, flags, products and versions in the reasons;
queries from one pool shared by all modes) and a share of noise (one-off reasons).

- **Recovery** at ``--turns`` (1,000) failed turns, K = 6, noise 10 % and 30 %, over
  ``--seeds`` seeds: adjusted Rand index, purity (each found mode's share of its largest
  planted cause) and completeness (sklearn's: each cause's turns kept in one mode), with noise
  as one class that unsorted turns should match; and with each reason diluted by 20 or 40
  random everyday words (a verbose judge). Target: ARI >= 0.8.
- **Surfaced after**: a window of 1,000 failed turns of 5 causes over 7 days is grouped, then
  the next run sees the same window plus m turns of a sixth cause in its last day; the least m
  at which that cause is its own mode, marked new (what pages), per seed.
- **Scale**: ``group_failures`` on 10,000 and 100,000 failed turns (8 causes, 10 % noise) in a
  child process each: seconds and peak resident memory above the process before the call
  (``VmHWM`` after a reset through ``/proc/self/clear_refs``); and the job itself on a SQLite
  file holding 10,000 and 100,000 stored failed turns (5 causes that fail a critical metric,
  so every turn is severe): reading the window with its reasons, grouping, writing modes and
  memberships (storing the turns first is not timed).

    .venv/bin/python bench/failure_modes.py                 # ~3 minutes on 2 cores
    .venv/bin/python bench/failure_modes.py --sizes 10000 --job-sizes 10000  # no 100k runs

Ends with one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn.metrics import adjusted_rand_score, completeness_score

from monitor.stats.failure_features import FailedTurn
from monitor.stats.failure_modes import Grouping, GroupingParams, KnownMode, group_failures
from tests.support.planted_failures import (
    METRICS,
    NOISE_WORDS,
    SEVERE_WHEN_STORED,
    planted_turn,
    planted_turns,
)

START = datetime(2026, 12, 1, tzinfo=UTC)
WEEK = timedelta(days=7)
RECENT = START + timedelta(days=6)
NEW_CAUSE = 6  # "policy fabricated": not among the five of the window
STEPS = (2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 30, 40)


def _predicted(grouping: Grouping, turns: list[FailedTurn]) -> list[int]:
    where = {e: i for i, m in enumerate(grouping.modes) for e in m.members}
    return [where.get(t.event_id, -1) for t in turns]


def purity(truth: list[int], pred: list[int]) -> float:
    groups: dict[int, Counter[int]] = {}
    for t, p in zip(truth, pred, strict=True):
        if p != -1:
            groups.setdefault(p, Counter())[t] += 1
    grouped = sum(sum(c.values()) for c in groups.values())
    return sum(c.most_common(1)[0][1] for c in groups.values()) / grouped if grouped else 0.0


def dilute(turns: list[FailedTurn], words: int, seed: int) -> list[FailedTurn]:
    """Each reason followed by ``words`` random everyday words: a verbose judge whose reasons
    are mostly not about the cause."""
    rng = random.Random(seed)
    return [
        FailedTurn(t.event_id, t.at, t.query, t.failing,
                   {m: r + " " + " ".join(rng.sample(NOISE_WORDS, words))
                    for m, r in t.reasons.items()})
        for t in turns
    ]  # fmt: skip


def recovery(n: int, seeds: int, noise: float, words: int = 0) -> dict[str, float]:
    aris, purities, completes = [], [], []
    for seed in range(seeds):
        turns, truth = planted_turns(n, 6, noise=noise, seed=seed, start=START, span=WEEK)
        if words:
            turns = dilute(turns, words, seed)
        g = group_failures(turns, METRICS, [], GroupingParams(), recent_start=RECENT)
        pred = _predicted(g, turns)
        aris.append(adjusted_rand_score(truth, pred))
        purities.append(purity(truth, pred))
        completes.append(completeness_score(truth, pred))
    return {
        "ari": statistics.median(aris),
        "ari_min": min(aris),
        "purity": statistics.median(purities),
        "completeness": statistics.median(completes),
    }


def surfaced_after(seed: int) -> int | None:
    base, _ = planted_turns(1000, 5, noise=0.1, seed=100 + seed, start=START, span=WEEK)
    params = GroupingParams()
    first = group_failures(base, METRICS, [], params, recent_start=RECENT)
    known = [KnownMode(m.mode_id, m.terms, m.metrics, m.first_seen) for m in first.modes]
    for m in STEPS:
        rng = random.Random(seed)
        extra = [
            planted_turn(NEW_CAUSE, rng, RECENT + timedelta(hours=23 * i / m), f"new-{i}")
            for i in range(m)
        ]
        g = group_failures(base + extra, METRICS, known, params, recent_start=RECENT)
        for mode in g.modes:
            share = sum(1 for e in mode.members if e.startswith("new-")) / mode.size
            if share >= 0.8 and mode.new and mode.emerging:
                return m
    return None


def _child(n: int) -> None:
    turns, _ = planted_turns(n, 8, noise=0.1, seed=7, start=START, span=WEEK)
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS

    def kb(field: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise KeyError(field)

    before = kb("VmRSS")
    t0 = time.perf_counter()
    g = group_failures(turns, METRICS, [], GroupingParams(), recent_start=RECENT)
    seconds = time.perf_counter() - t0
    peak = kb("VmHWM") - before
    print(json.dumps({"turns": n, "seconds": seconds, "peak_mb": peak / 1024,
                      "modes": len(g.modes), "unsorted": g.unsorted}))  # fmt: skip


def _job_child(n: int) -> None:
    """The job end to end on a SQLite file holding ``n`` failed turns: the window read from
    SQL with the reasons, grouped, modes and memberships written."""
    import tempfile

    from prometheus_client import CollectorRegistry

    from monitor.config.failure_modes import FailureModesConfig
    from monitor.jobs.failure_modes import FailureModesJob
    from monitor.metrics.exporter import Metrics
    from monitor.runtime.clock import ManualClock
    from monitor.storage.store import Store
    from tests.support.stored_failures import store_failed

    now = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/bench.db")
        try:
            store.migrate()
            turns, _ = planted_turns(
                n, 5, noise=0.0, seed=7, start=now - timedelta(days=6.9),
                span=timedelta(days=6.8), modes=SEVERE_WHEN_STORED,
            )  # fmt: skip
            for i in range(0, n, 5000):
                store_failed(store, turns[i : i + 5000], "bench")
            del turns
            Path("/proc/self/clear_refs").write_text("5")
            before = _kb("VmRSS")
            job = FailureModesJob(FailureModesConfig(), store, Metrics(CollectorRegistry()),
                                  clock=ManualClock(start=now.timestamp()))  # fmt: skip
            t0 = time.perf_counter()
            (result,) = job.run_once()
            seconds = time.perf_counter() - t0
            peak = _kb("VmHWM") - before
        finally:
            store.close()
    print(json.dumps({"turns": result.grouping.turns, "seconds": seconds, "peak_mb": peak / 1024,
                      "modes": len(result.grouping.modes)}))  # fmt: skip


def _kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def scale(n: int, what: str = "--child") -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, what, str(n)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--job-sizes", default="10000,100000")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--job-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return
    if args.job_child:
        _job_child(args.job_child)
        return
    results: dict[str, object] = {}
    for noise in (0.1, 0.3):
        r = recovery(args.turns, args.seeds, noise)
        results[f"recovery_noise_{int(noise * 100)}"] = r
        print(f"recovery at {args.turns} turns, 6 causes, noise {noise:.0%}: "
              f"ARI {r['ari']:.3f} (min {r['ari_min']:.3f}), purity {r['purity']:.3f}, "
              f"completeness {r['completeness']:.3f} (median of {args.seeds} seeds)")  # fmt: skip
    for words in (20, 40):
        r = recovery(args.turns, args.seeds, 0.1, words)
        results[f"recovery_diluted_{words}"] = r
        print(f"recovery at {args.turns} turns, 6 causes, noise 10%, each reason followed by "
              f"{words} random words: ARI {r['ari']:.3f} (min {r['ari_min']:.3f}), purity "
              f"{r['purity']:.3f}, completeness {r['completeness']:.3f}")  # fmt: skip
    needs = [surfaced_after(seed) for seed in range(args.seeds)]
    found = [n for n in needs if n is not None]
    results["surfaced_after"] = needs
    results["surfaced_after_median"] = statistics.median(found) if found else None
    print(f"a new cause is surfaced (own mode, marked new) after {needs} turns "
          f"(per seed; median {results['surfaced_after_median']})")  # fmt: skip
    for n in (int(s) for s in args.sizes.split(",") if s):
        r = scale(n)
        results[f"scale_{n}"] = r
        print(f"{n} failed turns: {r['seconds']:.1f} s, peak +{r['peak_mb']:.0f} MB, "
              f"{r['modes']} modes, {r['unsorted']} unsorted")  # fmt: skip
    for n in (int(s) for s in args.job_sizes.split(",") if s):
        r = scale(n, "--job-child")
        results[f"job_{n}"] = r
        print(f"the job on SQLite, {r['turns']} failed turns: {r['seconds']:.1f} s (read, group, "
              f"write), peak +{r['peak_mb']:.0f} MB, {r['modes']} modes")  # fmt: skip
    print(json.dumps(results))


if __name__ == "__main__":
    main()
