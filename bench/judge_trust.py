"""The judge watched, in simulation: interval coverage under repeated looks, labels needed with
uncertainty-driven selection, and the judge canary's delay and false flags (statistics code
only; no services).

    .venv/bin/python bench/judge_trust.py coverage   # 1,000 deployments x 100 looks
    .venv/bin/python bench/judge_trust.py labels     # labels for +/- 3 points, uncertain vs uniform
    .venv/bin/python bench/judge_trust.py canary     # runs to flag a doubled severe rate
    .venv/bin/python bench/judge_trust.py all --seed 7

coverage: a deployment has a true severe rate p (2-25 %) and a judge that misses 25 % of the
severe turns and calls 4 % of the others severe. Each look adds a labelling batch: a frame of
400 judged turns of which 30 are labelled (each with probability 30/400). At every look three
intervals are compared with p: the anytime-valid sequence (``running_sequence`` over the
batches' weighted estimates, lambda fitted on earlier batches), the fixed-n 95 % interval on
every label so far, and the fixed-n interval of the newest batch alone (what the quality
estimate showed until now). Reported: the share of deployments whose interval contains p at
*every* look.

labels: a population of 20,000 turns whose latent quality s decides the human band (severe
below 0.31); the judge reads s with noise (sd 0.12), so its errors sit near the band edge, as
in examples/. For each label budget n, 300 draws of uniform and of uncertain selection
(``inclusion_probabilities`` on the judge's closeness to the edge), the weighted estimate and
its 95 % interval. Reported: the smallest n whose estimate is within 3 points 95 % of the
time (1.96 x its root-mean-square error over the draws), the ratio
uncertain / uniform, and the coverage of both at that n.

canary: a 24-turn canary set whose human severe share is 25 %; a stable judge calls each turn
severe with a probability of its own (most turns always or never, a few near the edge), re-run
hourly. The canary's detector (``monitor.stats.run_cusum.RunDetector``: one observation per
run, the run's count of severe calls; calibrated like the job) is armed on the first runs.
Reported: over 200 simulated judges, the runs after a change until a judge whose severe calls
double is flagged (median, p90, max), and the flags of a stable judge over 30 days (720 runs)
per judge.

The last line is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from monitor.stats.active_sampling import (  # noqa: E402
    inclusion_probabilities,
    poisson_draw,
    uncertainty,
)
from monitor.stats.confidence_sequence import boundary_widths  # noqa: E402
from monitor.stats.ppi import weighted_interval, weighted_terms  # noqa: E402

Z95 = NormalDist().inv_cdf(0.975)


# ------------------------------------------------------------------ coverage


def _deployment(rng: np.random.Generator, looks: int, frame: int, labels: int) -> dict[str, bool]:
    p = rng.uniform(0.02, 0.25)
    y = rng.random((looks, frame)) < p
    miss, false_alarm = 0.25, 0.04
    u = rng.random((looks, frame))
    f = np.where(y, u >= miss, u < false_alarm).astype(float)
    pi = labels / frame
    xi = rng.random((looks, frame)) < pi
    w = np.where(xi, 1.0 / pi, 0.0)
    a = f * (1.0 - w)
    b = y * w
    # Per batch sums, for lambda fitted on earlier batches and pooled (fixed-n) estimates.
    sa, sb = a.sum(1), b.sum(1)
    saa, sbb, sab = (a * a).sum(1), (b * b).sum(1), (a * b).sum(1)
    lam = np.ones(looks)
    ca, cb, caa, cab = np.cumsum(sa), np.cumsum(sb), np.cumsum(saa), np.cumsum(sab)
    m = frame * np.arange(1, looks + 1)
    var_a = (caa - ca**2 / m) / (m - 1)
    cov = (cab - ca * cb / m) / (m - 1)
    fitted = np.clip(-cov / np.where(var_a > 0, var_a, 1.0), 0.0, 1.0)
    lam[1:] = np.where(var_a[:-1] > 0, fitted[:-1], 1.0)
    # Per batch estimate and standard error with its predictable lambda.
    est = (lam * sa + sb) / frame
    second = (lam**2 * saa + 2 * lam * sab + sbb) / frame
    se = np.sqrt(np.maximum(second - est**2, 0.0) * frame / (frame - 1) / frame)
    widths = boundary_widths(se, 0.05)
    running = np.cumsum(est) / np.arange(1, looks + 1)
    anytime = bool(np.all(np.abs(running - p) <= widths))
    newest = bool(np.all(np.abs(est - p) <= Z95 * se))
    # Fixed-n on every label so far: lambda tuned on the pooled data, CLT interval.
    csbb = np.cumsum(sbb)
    lam_all = np.where(var_a > 0, fitted, 1.0)
    pooled = (lam_all * ca + cb) / m
    pooled_var = (lam_all**2 * caa + 2 * lam_all * cab + csbb) / m - pooled**2
    pooled_se = np.sqrt(np.maximum(pooled_var, 0.0) * m / (m - 1) / m)
    cumulative = bool(np.all(np.abs(pooled - p) <= Z95 * pooled_se))
    return {"anytime": anytime, "fixed_cumulative": cumulative, "fixed_newest": newest}


def coverage(args: argparse.Namespace) -> dict[str, float]:
    rng = np.random.default_rng(args.seed)
    hits = {"anytime": 0, "fixed_cumulative": 0, "fixed_newest": 0}
    for _ in range(args.deployments):
        for key, ok in _deployment(rng, args.looks, args.frame, args.batch_labels).items():
            hits[key] += ok
    out = {k: v / args.deployments for k, v in hits.items()}
    print(
        f"coverage at every one of {args.looks} looks, {args.deployments} deployments "
        f"({args.batch_labels} labels per {args.frame}-turn batch):\n"
        f"  anytime-valid sequence           {out['anytime']:.1%}  (target >= 94 %)\n"
        f"  fixed-n 95 % on all labels so far {out['fixed_cumulative']:.1%}\n"
        f"  fixed-n 95 % of the newest batch  {out['fixed_newest']:.1%}"
    )
    return {f"coverage_{k}": v for k, v in out.items()}


# ------------------------------------------------------------------ label efficiency


def _population(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # Most turns are fine; a tail is poor. About 12 % below the severe edge.
    s = np.clip(np.where(rng.random(size) < 0.8, rng.beta(6, 2, size), rng.beta(2, 4, size)), 0, 1)
    y = (s < 0.31).astype(float)
    judged = np.clip(s + rng.normal(0.0, 0.12, size), 0.0, 1.0)
    f = (judged < 0.31).astype(float)
    return y, f, judged


def _precision(
    y: np.ndarray, f: np.ndarray, pi: np.ndarray, reps: int, rng: np.random.Generator
) -> tuple[float, float]:
    """(1.96 x the spread of the estimate over draws, coverage of its 95 % interval). The
    spread is measured, not the interval's own width: with few labels a draw that holds no
    judge error reports a narrow interval that does not cover."""
    truth = float(y.mean())
    points, covered = [], 0
    for _ in range(reps):
        xi = poisson_draw(pi, int(rng.integers(2**62)))
        interval, _lam = weighted_interval(weighted_terms(f, xi, y, pi))
        if interval.point is None or interval.lower is None or interval.upper is None:
            points.append(float("nan"))
            continue
        points.append(interval.point)
        covered += interval.lower <= truth <= interval.upper
    errors = np.asarray(points) - truth
    if np.isnan(errors).any():
        return float("inf"), covered / reps
    return Z95 * float(np.sqrt(np.mean(errors**2))), covered / reps


def labels(args: argparse.Namespace) -> dict[str, float]:
    rng = np.random.default_rng(args.seed)
    y, f, judged = _population(rng, args.population)
    u = np.array([uncertainty([s], panel_disagreed=False, judges_split=False) for s in judged])
    grid = list(range(20, 2001, 10))
    found: dict[str, tuple[int, float]] = {}
    for name in ("uniform", "uncertain"):
        lo, hi = 0, len(grid) - 1
        # Binary search on the grid for the smallest n within +/- 3 points.
        best: tuple[int, float] | None = None
        while lo <= hi:
            mid = (lo + hi) // 2
            n = grid[mid]
            pi = np.full(y.size, n / y.size) if name == "uniform" else inclusion_probabilities(u, n)
            width, cover = _precision(y, f, pi, args.reps, rng)
            if width <= 0.03:
                best, hi = (n, cover), mid - 1
            else:
                lo = mid + 1
        if best is None:
            raise SystemExit(f"{name}: no n up to {grid[-1]} reaches +/- 3 points")
        found[name] = best
    ratio = found["uncertain"][0] / found["uniform"][0]
    print(
        f"labels for a +/- 3-point 95 % interval on the severe rate ({y.mean():.1%} severe, "
        f"judge calls {f.mean():.1%}, {args.population} turns, {args.reps} draws per n):\n"
        f"  uniform    {found['uniform'][0]:5d} labels  coverage {found['uniform'][1]:.1%}\n"
        f"  uncertain  {found['uncertain'][0]:5d} labels  coverage {found['uncertain'][1]:.1%}\n"
        f"  ratio uncertain / uniform {ratio:.2f}  (aim <= 0.6)"
    )
    return {
        "labels_uniform": found["uniform"][0],
        "labels_uncertain": found["uncertain"][0],
        "labels_ratio": ratio,
        "coverage_uniform": found["uniform"][1],
        "coverage_uncertain": found["uncertain"][1],
    }


# ------------------------------------------------------------------ the canary


def _stable_judge(rng: np.random.Generator, turns: int) -> np.ndarray:
    """Per canary turn, the probability a stable judge calls it severe: a quarter of the turns
    are severe to people and nearly always called so, a few sit near the edge, the rest never."""
    q = np.full(turns, 0.01)
    severe = turns // 4
    q[:severe] = 0.97
    q[severe - 1] = rng.uniform(0.3, 0.7)  # one severe turn near the edge
    q[severe : severe + 2] = rng.uniform(0.05, 0.3, 2)  # two others near it
    return q


def _runs_until_alarm(
    q_before: np.ndarray, q_after: np.ndarray | None, runs: int, rng: np.random.Generator, args
) -> tuple[int | None, int]:
    """(runs after the change until the first alarm, alarms over ``runs`` runs)."""
    from monitor.reports.judge_canary import DEFAULT_SHIFTS, CanaryRun, arm, baseline_of, observe
    from monitor.stats.run_cusum import RunDetector

    def run(q: np.ndarray) -> CanaryRun:
        calls = tuple(bool(x) for x in rng.random(q.size) < q)
        return CanaryRun("ok", None, q.size, None, 0.5, calls)

    first = [run(q_before) for _ in range(args.baseline_runs)]
    baseline = baseline_of(first)
    assert baseline is not None
    cal = arm(
        baseline,
        DEFAULT_SHIFTS,
        false_alarm_days=30.0,
        turns_per_run=q_before.size,
        interval_seconds=3600.0,
        judges=2,
    )
    detector = RunDetector(DEFAULT_SHIFTS)
    alarms, delay = 0, None
    for k in range(runs):
        q = q_before if q_after is None else q_after
        if observe(detector, cal, run(q), float(k)):
            alarms += 1
            if delay is None:
                delay = k + 1
            if q_after is not None:
                break
    return delay, alarms


def canary(args: argparse.Namespace) -> dict[str, float]:
    rng = np.random.default_rng(args.seed)
    turns = 24
    delays: list[int] = []
    missed = 0
    stable_alarms = 0
    for _ in range(args.judges):
        q = _stable_judge(rng, turns)
        doubled = q.copy()
        extra = round(float(q.sum()))  # as many more severe calls again: the rate doubles
        never = np.flatnonzero(q < 0.05)
        doubled[rng.choice(never, size=min(extra, never.size), replace=False)] = 0.97
        delay, _ = _runs_until_alarm(q, doubled, 200, rng, args)
        if delay is None:
            missed += 1
        else:
            delays.append(delay)
        _, alarms = _runs_until_alarm(q, None, 30 * 24, rng, args)
        stable_alarms += alarms
    d = np.asarray(delays)
    per_30_days = stable_alarms / args.judges
    print(
        f"judge canary ({turns} turns, hourly, {args.baseline_runs} baseline runs, "
        f"{args.judges} simulated judges, false-alarm budget 1 per 30 days for 2 judges):\n"
        f"  severe calls double: flagged after median {np.median(d):.0f} runs, p90 "
        f"{np.percentile(d, 90):.0f}, max {d.max()} (missed {missed})\n"
        f"  stable judge, 30 days: {stable_alarms} false flags in {args.judges} judges "
        f"({per_30_days:.3f} per judge per 30 days)"
    )
    return {
        "canary_delay_median_runs": float(np.median(d)),
        "canary_delay_p90_runs": float(np.percentile(d, 90)),
        "canary_delay_max_runs": float(d.max()),
        "canary_missed": missed,
        "canary_false_flags_per_judge_30d": per_30_days,
    }


# ------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["coverage", "labels", "canary", "all"])
    parser.add_argument("--seed", type=int, default=20261128)
    parser.add_argument("--deployments", type=int, default=1000)
    parser.add_argument("--looks", type=int, default=100)
    parser.add_argument("--frame", type=int, default=400)
    parser.add_argument("--batch-labels", type=int, default=30)
    parser.add_argument("--population", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--judges", type=int, default=200)
    parser.add_argument("--baseline-runs", type=int, default=3)
    args = parser.parse_args(argv)
    results: dict[str, float] = {}
    if args.what in ("coverage", "all"):
        results |= coverage(args)
    if args.what in ("labels", "all"):
        results |= labels(args)
    if args.what in ("canary", "all"):
        results |= canary(args)
    print(json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
