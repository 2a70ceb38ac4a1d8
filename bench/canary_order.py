"""The judge canary against the order of its file: runs to the alarm for a judge whose severe
calls double, over permutations of the canary file.

The real job (``JudgeCanaryJob`` built by ``build_jobs``, the real openai client, a temporary
SQLite store) judges ``examples/judge_canary.jsonl`` through the fake judge server of
``tests/fake_judge_server.py`` (in this process: nothing here is timed). The judge calls 6 of the
24 turns severe for 3 baseline runs and 3 more, then 12 (its severe calls double). Orders of
the file: the harsher judge's severe turns first, last, and ``--permutations`` random
permutations (seeds 0, 1, ...). Reported per order: the harsher runs until the stored alarm
(what the gauge, ``casewatch detect`` and ``CasewatchJudgeChanged`` read), median and max over
the orders; and, replayed from the same calls, what the previous design concluded, the run's
calls fed one by one in file order to the per-call CUSUM (``monitor.stats.detection``,
calibrated per call): the alarm at the end of a run, or never within ``--max-runs``.

    .venv/bin/python bench/canary_order.py                  # 20 permutations, 15 runs at most

The last line is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from monitor.config.settings import Settings  # noqa: E402
from monitor.jobs.build import build_jobs  # noqa: E402
from monitor.jobs.inputs import read_job_inputs  # noqa: E402
from monitor.jobs.judge_canary import JudgeCanaryJob  # noqa: E402
from monitor.metrics.exporter import Metrics  # noqa: E402
from monitor.reports.judge_canary import DEFAULT_SHIFTS, CanaryRun, baseline_of  # noqa: E402
from monitor.runtime.clock import ManualClock  # noqa: E402
from monitor.stats.cusum_calibration import calibrate  # noqa: E402
from monitor.stats.detection import Detector  # noqa: E402
from monitor.storage import canary_runs  # noqa: E402
from monitor.storage.store import Store  # noqa: E402
from tests.fake_judge_server import FakeJudgeServer  # noqa: E402
from tests.fixtures.judge_server import ShiftingJudge, fake_judge_config  # noqa: E402

CANARY = ROOT / "examples" / "judge_canary.jsonl"
HOUR = 3600.0
BASELINE_RUNS = 3
STABLE_RUNS = 3  # after the baseline, before the judge changes
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _orders(lines: list[str], permutations: int) -> dict[str, list[int]]:
    n = len(lines)
    out = {"severe first": list(range(n)), "severe last": list(range(n))[::-1]}
    for seed in range(permutations):
        out[f"permutation {seed}"] = [int(i) for i in np.random.default_rng(seed).permutation(n)]
    return out


def _per_call(calls: list[tuple[bool, ...]], judges: int) -> int | None:
    """Harsher runs until the per-call CUSUM (fed in file order) ends a run in alarm."""
    base = baseline_of([CanaryRun("ok", None, len(c), None, 0.5, c) for c in calls[:BASELINE_RUNS]])
    assert base is not None
    cal = calibrate(
        base.severe_rate,
        DEFAULT_SHIFTS,
        false_alarm_days=30.0,
        rate_per_s=len(calls[0]) / HOUR,
        detectors=judges * len(DEFAULT_SHIFTS),
    )
    detector = Detector(DEFAULT_SHIFTS)
    for i, c in enumerate(calls[BASELINE_RUNS:]):
        detector.update(list(c), [float(i)] * len(c), cal)
        harsher = i + 1 - STABLE_RUNS
        if harsher >= 1 and detector.latched is not None:
            return harsher
    return None


def _one_order(server: FakeJudgeServer, path: Path, db: Path, max_runs: int) -> dict[str, Any]:
    answers = [json.loads(x)["turn"]["answer"] for x in CANARY.read_text().splitlines()]
    judge = ShiftingJudge(answers[:6], answers[6:12])
    server.responder = judge
    settings = Settings(
        judges={"llm": fake_judge_config(server)},
        judge="llm",
        judge_canary={"file": str(path), "interval_seconds": HOUR},
        sampling={"budget_calls_per_hour": None, "budget_usd_per_hour": None},
        drift={"enabled": False},
        detection={"enabled": False},
        quality_estimate={"enabled": False},
        storage={"url": f"sqlite:///{db}", "retention_days": None},
    )
    store = Store(settings.storage.url)
    store.migrate()
    clock = ManualClock()
    inputs = read_job_inputs(settings)
    [job] = [
        j
        for j in build_jobs(settings, store, Metrics(CollectorRegistry()), clock, inputs=inputs)
        if isinstance(j, JudgeCanaryJob)
    ]
    calls: list[tuple[bool, ...]] = []
    flagged = None
    try:
        for run in range(BASELINE_RUNS + STABLE_RUNS + max_runs):
            harsher = run + 1 - BASELINE_RUNS - STABLE_RUNS
            if harsher == 1:
                judge.harsher()
            calls.append(job.run_once()["llm"].severe)
            clock.advance(HOUR)
            if flagged is None and harsher >= 1:
                rows = canary_runs.runs_since(store, EPOCH)
                if rows[-1]["alarm"]:
                    flagged = harsher
        severe = [sum(c) for c in calls]
    finally:
        job.close()
        store.close()
    return {"per_run": flagged, "per_call": _per_call(calls, judges=1), "severe": severe}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--permutations", type=int, default=20)
    parser.add_argument("--max-runs", type=int, default=15)
    args = parser.parse_args()
    lines = CANARY.read_text().splitlines()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp, FakeJudgeServer() as server:
        for name, order in _orders(lines, args.permutations).items():
            slug = name.replace(" ", "-")
            path = Path(tmp) / f"{slug}.jsonl"
            path.write_text("".join(lines[i] + "\n" for i in order))
            results[name] = _one_order(server, path, Path(tmp) / f"{slug}.db", args.max_runs)
            r = results[name]
            print(
                f"{name:>15}: severe calls {r['severe'][0]} -> {r['severe'][-1]} of 24; "
                f"alarm after {r['per_run']} run(s) (per call, in file order: {r['per_call']})"
            )
    per_run = [r["per_run"] for r in results.values()]
    per_call = [r["per_call"] for r in results.values()]
    flagged = [x for x in per_run if x is not None]
    call_flagged = [x for x in per_call if x is not None]
    figures = {
        "orders": len(results),
        "per_run_missed": per_run.count(None),
        "per_run_median_runs": statistics.median(flagged) if flagged else None,
        "per_run_max_runs": max(flagged) if flagged else None,
        "per_run_distinct_outcomes": len({json.dumps(r["per_run"]) for r in results.values()}),
        "per_call_missed": per_call.count(None),
        "per_call_median_runs": statistics.median(call_flagged) if call_flagged else None,
        "per_call_max_runs": max(call_flagged) if call_flagged else None,
    }
    print(
        f"per run (casewatch): alarm after median {figures['per_run_median_runs']} run(s), max "
        f"{figures['per_run_max_runs']}, missed {figures['per_run_missed']} of {len(results)} "
        f"orders; per call in file order (before): missed {figures['per_call_missed']} of "
        f"{len(results)} within {args.max_runs} runs"
    )
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()
