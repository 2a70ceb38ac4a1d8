"""The cascade against uniform sampling at the same LLM-call budget, on simulated traffic whose
cheap look agrees with the LLM judge low / medium / high (statistics code only).

Each turn of traffic is severe for the LLM judge with probability p (5 %; 15 % after the step);
the cheap look puts it in one of four cells (its band) from a distribution that depends only on
whether the turn is severe (``AGREEMENT``; ``low`` is a useless cheap look: the same
distribution either way). The cascade's probabilities come from ``monitor.stats.inclusion``
(risks estimated from a warm-up of judged pairs, as the daemon does online, then allocated to
the budget with the floor); uniform draws every turn with the same rate.

Reported per agreement level:

- detection: the Bernoulli CUSUM (uniform) and the cell-conditional CUSUM
  (``monitor.stats.cell_cusum``, cascade), both for 5 -> 15 %, both calibrated to the same
  false-alarm budget in traffic (one false alarm per ``--arl0-turns`` turns), each on
  in-control rates estimated as the job does, from ``--reference`` judged turns of a reference
  window; uniform at ``--rate`` gives the delay to match; the cascade's smallest budget whose
  delay (Brook-Evans chain) is no longer is found by bisection; both are then simulated over
  ``--runs`` runs from the step (median and mean delay in turns of traffic), and their false
  alarms counted over ``--runs`` in-control streams of ``--fa-turns`` turns against the
  expected count;
- estimation: the weighted severe share (Hajek, and post-stratified on the cheap look's cell
  counts) over ``--runs`` windows of ``--window`` turns at the uniform's budget: bias in points
  (mean minus the windows' true share) and mean 95 % interval width, against uniform's.

    .venv/bin/python bench/cascade.py                    # ~2 min on a shared 2-core machine
    .venv/bin/python bench/cascade.py --seed 2 --runs 200
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from monitor.stats import cusum_calibration as bernoulli  # noqa: E402
from monitor.stats.cell_cusum import CellModel, arl, cell_baseline, threshold  # noqa: E402
from monitor.stats.inclusion import Pairs, allocate, risks  # noqa: E402
from monitor.stats.weighted_rates import hajek, poststratified  # noqa: E402

CELLS = ("severe", "moderate", "minor", "none")
# P(cell | clean turn), P(cell | severe turn) per agreement level.
AGREEMENT: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "low": ((0.05, 0.20, 0.30, 0.45), (0.05, 0.20, 0.30, 0.45)),
    "medium": ((0.04, 0.16, 0.30, 0.50), (0.40, 0.30, 0.20, 0.10)),
    "high": ((0.01, 0.09, 0.30, 0.60), (0.70, 0.20, 0.07, 0.03)),
}
P0, P1 = 0.05, 0.15
FLOOR = 0.01
POWER = float(__import__("os").environ.get("CASCADE_POWER", "1.0"))


def auroc(f0: tuple[float, ...], f1: tuple[float, ...]) -> float:
    """P(a severe turn's cell ranks worse than a clean one's), ties half."""
    total = 0.0
    for i, a in enumerate(f1):
        for j, b in enumerate(f0):
            total += a * b * (1.0 if i < j else 0.5 if i == j else 0.0)
    return total


def cell_rates(level: str, p: float) -> dict[str, float]:
    f0, f1 = AGREEMENT[level]
    return {c: p * f1[k] / (p * f1[k] + (1 - p) * f0[k]) for k, c in enumerate(CELLS)}


def cell_shares(level: str, p: float) -> dict[str, float]:
    f0, f1 = AGREEMENT[level]
    return {c: p * f1[k] + (1 - p) * f0[k] for k, c in enumerate(CELLS)}


def traffic(level: str, p: float, n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """n turns: (severe, cell index)."""
    f0, f1 = AGREEMENT[level]
    y = rng.random(n) < p
    u = rng.random(n)
    c0 = np.searchsorted(np.cumsum(f0), u, side="right").clip(0, 3)
    c1 = np.searchsorted(np.cumsum(f1), u, side="right").clip(0, 3)
    return y, np.where(y, c1, c0)


def warm_up_risks(level: str, rng: np.random.Generator) -> dict[str, float]:
    """Risks from the pairs a week of floor-and-uniform judging leaves (2,000 pairs)."""
    y, c = traffic(level, P0, 2000, rng)
    pairs = {
        name: Pairs(int((c == k).sum()), int((y & (c == k)).sum())) for k, name in enumerate(CELLS)
    }
    return risks(pairs, list(CELLS))


def cascade_probabilities(level: str, budget: float, risk: dict[str, float]) -> dict[str, float]:
    return allocate(cell_shares(level, P0), risk, budget, floor=FLOOR, power=POWER)


def judged_mix(level: str, pi: dict[str, float], p: float) -> dict[str, float]:
    shares = cell_shares(level, p)
    return {c: shares[c] * pi[c] for c in CELLS}


def calls_per_turn(level: str, pi: dict[str, float], p: float) -> float:
    return sum(judged_mix(level, pi, p).values())


def reference_rates(
    level: str, pi: dict[str, float], reference: int, rng: np.random.Generator
) -> dict[str, float]:
    """Each cell's in-control rate as the detection job estimates it: from the ``reference``
    judged turns of a reference window drawn with ``pi`` (no prior: a baseline, not a risk)."""
    mix = judged_mix(level, pi, P0)
    total = sum(mix.values())
    truth = cell_rates(level, P0)
    out = {}
    for c in CELLS:
        n = int(rng.binomial(reference, mix[c] / total))
        out[c] = cell_baseline(int(rng.binomial(n, truth[c])), n)
    return out


def cascade_detector(
    level: str,
    budget: float,
    risk: dict[str, float],
    arl0_turns: float,
    baseline: dict[str, float] | None = None,
) -> tuple[dict[str, float], CellModel, float]:
    """(probabilities, model, threshold) of the cascade at ``budget`` calls per turn; the
    detector's in-control rates are ``baseline`` (default: the true ones)."""
    pi = cascade_probabilities(level, budget, risk)
    rates = cell_rates(level, P0) if baseline is None else baseline
    p0 = sum(cell_shares(level, P0)[c] * rates[c] for c in CELLS)
    model = CellModel(dict(rates), judged_mix(level, pi, P0), p0)
    calls = calls_per_turn(level, pi, P0)
    h = threshold(model, p0_to_p1(p0), arl0_turns * calls)
    return pi, model, h


def p0_to_p1(p0: float) -> float:
    return min(0.9, p0 * P1 / P0)


def typical_baseline(level: str, pi: dict[str, float], reference: int) -> dict[str, float]:
    """``reference_rates`` at its expected counts (no draw): what the bisection plans with."""
    mix = judged_mix(level, pi, P0)
    total = sum(mix.values())
    truth = cell_rates(level, P0)
    out = {}
    for c in CELLS:
        n = round(reference * mix[c] / total)
        out[c] = cell_baseline(round(n * truth[c]), n)
    return out


def cascade_delay(
    level: str, budget: float, risk: dict[str, float], arl0_turns: float, reference: int
) -> float:
    """Expected delay in turns of traffic after the step (chain; the judged mix after it)."""
    baseline = typical_baseline(level, cascade_probabilities(level, budget, risk), reference)
    pi, model, h = cascade_detector(level, budget, risk, arl0_turns, baseline)
    after = CellModel(model.rates, judged_mix(level, pi, P1), model.p0)
    obs = arl(after, p0_to_p1(model.p0), h, truth=cell_rates(level, P1))
    return obs / calls_per_turn(level, pi, P1)


def simulate_cell_cusum(
    level: str,
    p: float,
    pi: dict[str, float],
    incs: dict[str, tuple[float, float]],
    h: float,
    runs: int,
    turns: int,
    rng: np.random.Generator,
    *,
    stop_at_first: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Per run: turns of traffic to the first alarm (or -1) and alarms counted."""
    up = np.array([incs[c][0] for c in CELLS])
    down = np.array([incs[c][1] for c in CELLS])
    prob = np.array([pi[c] for c in CELLS])
    s = np.zeros(runs)
    first = np.full(runs, -1)
    alarms = np.zeros(runs, dtype=int)
    alive = np.ones(runs, dtype=bool)
    chunk = 4096
    done = 0
    while done < turns and alive.any():
        n = min(chunk, turns - done)
        y, c = traffic(level, p, runs * n, rng)
        y, c = y.reshape(runs, n), c.reshape(runs, n)
        drawn = rng.random((runs, n)) < prob[c]
        inc = np.where(drawn, np.where(y, up[c], down[c]), 0.0)
        for t in range(n):
            s = np.maximum(0.0, s + inc[:, t])
            hit = (s >= h) & alive
            if hit.any():
                first[hit & (first < 0)] = done + t + 1
                alarms[hit] += 1
                s[hit] = 0.0
                if stop_at_first:
                    alive &= ~hit
        done += n
    return first, alarms


def detection(level: str, args: argparse.Namespace, rng: np.random.Generator) -> dict[str, float]:
    risk = warm_up_risks(level, rng)
    # Uniform: the Bernoulli CUSUM on the judged turns, same false-alarm budget in traffic.
    r = args.rate
    planned = cell_baseline(round(args.reference * P0), args.reference)
    h_plan = bernoulli.threshold(planned, planned * P1 / P0, args.arl0_turns * r)
    delay_u = bernoulli.expected_delay(planned, planned * P1 / P0, h_plan, P1) / r
    # The uniform detector as the job runs it: its baseline from as many reference turns.
    p0_u = cell_baseline(int(rng.binomial(args.reference, P0)), args.reference)
    h_u_est = bernoulli.threshold(p0_u, p0_u * P1 / P0, args.arl0_turns * r)
    lo, hi = FLOOR, r
    if cascade_delay(level, hi, risk, args.arl0_turns, args.reference) > delay_u:
        budget = hi  # no saving: the cascade needs the uniform's budget (or more)
    else:
        for _ in range(12):
            mid = (lo + hi) / 2
            if cascade_delay(level, mid, risk, args.arl0_turns, args.reference) <= delay_u:
                hi = mid
            else:
                lo = mid
        budget = hi
    pi = cascade_probabilities(level, budget, risk)
    baseline = reference_rates(level, pi, args.reference, rng)
    pi, model, h_c = cascade_detector(level, budget, risk, args.arl0_turns, baseline)
    calls_c = calls_per_turn(level, pi, P0)
    incs = model.increments(p0_to_p1(model.p0))
    uni_pi = dict.fromkeys(CELLS, r)
    u_a, u_b = bernoulli.increments(p0_u, p0_u * P1 / P0)
    uni_incs = dict.fromkeys(CELLS, (u_a, u_b))
    h_u = h_u_est
    horizon = int(delay_u * 20)
    first_u, _ = simulate_cell_cusum(
        level, P1, uni_pi, uni_incs, h_u, args.runs, horizon, rng, stop_at_first=True
    )
    first_c, _ = simulate_cell_cusum(
        level, P1, pi, incs, h_c, args.runs, horizon, rng, stop_at_first=True
    )
    _, fa_u = simulate_cell_cusum(
        level, P0, uni_pi, uni_incs, h_u, args.runs, args.fa_turns, rng, stop_at_first=False
    )
    _, fa_c = simulate_cell_cusum(
        level, P0, pi, incs, h_c, args.runs, args.fa_turns, rng, stop_at_first=False
    )
    expected = args.runs * args.fa_turns / args.arl0_turns
    return {
        "calls_uniform": r,
        "calls_cascade": calls_c,
        "ratio": calls_c / r,
        "delay_uniform_median": float(np.median(first_u[first_u > 0])),
        "delay_cascade_median": float(np.median(first_c[first_c > 0])),
        "delay_uniform_mean": float(first_u[first_u > 0].mean()),
        "delay_cascade_mean": float(first_c[first_c > 0].mean()),
        "fa_uniform": int(fa_u.sum()),
        "fa_cascade": int(fa_c.sum()),
        "fa_expected": expected,
    }


def estimation(level: str, args: argparse.Namespace, rng: np.random.Generator) -> dict[str, float]:
    risk = warm_up_risks(level, rng)
    pi = cascade_probabilities(level, args.rate, risk)
    prob = np.array([pi[c] for c in CELLS])
    err_h, err_p, err_u, w_h, w_p, w_u = [], [], [], [], [], []
    for _ in range(args.runs):
        y, c = traffic(level, P0, args.window, rng)
        truth = float(y.mean())
        drawn = rng.random(args.window) < prob[c]
        incl = prob[c][drawn]
        est = hajek(y[drawn], incl)
        counts = {name: float((c == k).sum()) for k, name in enumerate(CELLS)}
        post = poststratified(y[drawn], incl, [CELLS[k] for k in c[drawn]], counts).rate
        uni = rng.random(args.window) < args.rate
        est_u = hajek(y[uni], np.full(int(uni.sum()), args.rate))
        for errs, widths, e in ((err_h, w_h, est), (err_p, w_p, post), (err_u, w_u, est_u)):
            iv = e.interval()
            errs.append((e.point or 0.0) - truth)
            widths.append(iv.width)
    return {
        "bias_hajek_pts": 100 * float(np.mean(err_h)),
        "bias_post_pts": 100 * float(np.mean(err_p)),
        "bias_uniform_pts": 100 * float(np.mean(err_u)),
        "se_of_bias_pts": 100 * float(np.std(err_h) / math.sqrt(args.runs)),
        "width_hajek_pts": 100 * float(np.mean(w_h)),
        "width_post_pts": 100 * float(np.mean(w_p)),
        "width_uniform_pts": 100 * float(np.mean(w_u)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rate", type=float, default=0.10, help="uniform's rate = the budget")
    parser.add_argument("--arl0-turns", type=float, default=200_000.0)
    parser.add_argument("--fa-turns", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=20_000, help="turns per estimate")
    parser.add_argument(
        "--reference", type=int, default=20_000, help="judged turns behind each baseline"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--levels", default="low,medium,high")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    print(
        "| agreement | cheap-look AUROC | LLM calls per turn, uniform -> cascade (ratio) | "
        "delay in turns, uniform / cascade (median; mean) | false alarms uniform / cascade "
        "(expected) | bias of the weighted rate, Hajek / post-stratified / uniform (points) | "
        "95 % width, Hajek / post-stratified / uniform (points) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for level in args.levels.split(","):
        d = detection(level, args, rng)
        e = estimation(level, args, rng)
        print(
            f"| {level} | {auroc(*AGREEMENT[level]):.2f} "
            f"| {d['calls_uniform']:.3f} -> {d['calls_cascade']:.3f} ({d['ratio']:.2f}) "
            f"| {d['delay_uniform_median']:.0f} / {d['delay_cascade_median']:.0f} "
            f"({d['delay_uniform_mean']:.0f}; {d['delay_cascade_mean']:.0f}) "
            f"| {d['fa_uniform']} / {d['fa_cascade']} ({d['fa_expected']:.0f}) "
            f"| {e['bias_hajek_pts']:+.2f} / {e['bias_post_pts']:+.2f} / "
            f"{e['bias_uniform_pts']:+.2f} (se {e['se_of_bias_pts']:.2f}) "
            f"| {e['width_hajek_pts']:.2f} / {e['width_post_pts']:.2f} / "
            f"{e['width_uniform_pts']:.2f} |",
            flush=True,
        )
    print(f"({args.runs} runs per cell, seed {args.seed}, {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
