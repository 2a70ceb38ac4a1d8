"""False alarms of the sequential detectors on simulated in-control streams (detector code only).

A simulated deployment per judged-turn rate (default 0.5, 2 and 10 judged turns/s): ``--detectors``
(assistant, signal) detectors, each a ``monitor.stats.detection.Detector`` (Bernoulli CUSUMs
over the 1.5x/2x/3x/5x grid), calibrated exactly as the job does (``calibrate``: the
deployment's false-alarm budget ``--false-alarm-days``, union bound over every CUSUM, at the
calibration rate ``baseline_policy.calibration_rate`` gives for the live judged-turn rate) from
a baseline estimated on a simulated 7-day reference window, then fed ``--days`` days of
observations whose severe rate never changes (baselines spread over 2-20 %). Counted: pages,
i.e. alarms raised (``Detector.update`` returning True; a latched detector does not page again).
Reported per rate and overall: pages per ``--false-alarm-days`` days of the whole deployment,
with an exact Poisson 95 % interval, against the configured 1.

``--live-factor F``: the live stream runs F times faster than its reference window did (the
reference holds rate / F judged turns per second). ``--calibrate-on reference`` calibrates for
the reference window's rate instead of the live one (how thresholds were set before they
followed the live rate), to show what that costs on such a stream.

    .venv/bin/python bench/detector_false_alarms.py                      # 30 days, budget 30 d
    .venv/bin/python bench/detector_false_alarms.py --days 60 --false-alarm-days 2   # stress
    .venv/bin/python bench/detector_false_alarms.py --rates 15 --live-factor 30 --days 30 \
        --false-alarm-days 1                                 # live 30x faster than the reference

With the default budget a 30-day run expects at most ~1 page per rate (the union bound makes it
fewer), so the interval is wide; the stress setting (a budget of 1-2 days) runs the same code
where the expected count is large enough for a tight interval.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from monitor.stats.baseline_policy import calibration_rate  # noqa: E402
from monitor.stats.cusum_calibration import calibrate  # noqa: E402
from monitor.stats.detection import DEFAULT_SHIFTS, Detector  # noqa: E402

DAY_S = 86400.0
REFERENCE_DAYS = 7.0
BASELINES = (0.02, 0.05, 0.1, 0.2)


def poisson_interval(k: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Garwood) interval for a Poisson mean from one count."""
    a = 1 - level
    lo = 0.0 if k == 0 else float(stats.chi2.ppf(a / 2, 2 * k) / 2)
    hi = float(stats.chi2.ppf(1 - a / 2, 2 * k + 2) / 2)
    return lo, hi


def simulate_rate(
    rate: float,
    detectors: int,
    days: float,
    budget_days: float,
    rng: np.random.Generator,
    *,
    live_factor: float = 1.0,
    calibrate_on: str = "live",
) -> dict[str, float]:
    cusums = detectors * len(DEFAULT_SHIFTS)
    pages = 0
    observations = 0
    reference_rate = rate / live_factor
    # The job measures the live rate and rounds it up to its grid; before thresholds followed
    # the live rate they were set for the reference window's.
    assumed = calibration_rate(None, rate) if calibrate_on == "live" else reference_rate
    for d in range(detectors):
        p0 = BASELINES[d % len(BASELINES)]
        ref_n = int(reference_rate * REFERENCE_DAYS * DAY_S)
        p0_hat = (rng.binomial(ref_n, p0) + 0.5) / (ref_n + 1)  # as the job estimates it
        cal = calibrate(
            p0_hat,
            DEFAULT_SHIFTS,
            false_alarm_days=budget_days,
            rate_per_s=assumed,
            detectors=cusums,
        )
        det = Detector(DEFAULT_SHIFTS)
        per_day = int(rate * DAY_S)
        for day in range(int(days)):
            x = rng.random(per_day) < p0
            t = day * DAY_S + np.arange(per_day) / rate
            pages += det.update(x, t, cal)
            observations += per_day
    exposure = days  # the detectors run side by side: deployment-days
    lo, hi = poisson_interval(pages)
    scale = budget_days / exposure
    return {
        "rate": rate,
        "reference_rate": reference_rate,
        "calibrated_for": assumed,
        "detectors": detectors,
        "cusums": cusums,
        "days": days,
        "observations": observations,
        "pages": pages,
        "pages_per_budget": pages * scale,
        "ci_low": lo * scale,
        "ci_high": hi * scale,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="0.5,2,10", help="judged turns per second")
    parser.add_argument("--detectors", type=int, default=8, help="(assistant, signal) pairs")
    parser.add_argument("--days", type=float, default=30.0, help="simulated days per detector")
    parser.add_argument("--false-alarm-days", type=float, default=30.0, help="the budget")
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument(
        "--live-factor", type=float, default=1.0, help="live rate / the reference window's"
    )
    parser.add_argument(
        "--calibrate-on",
        choices=("live", "reference"),
        default="live",
        help="the rate thresholds are set for (live: as the job does)",
    )
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    rows = []
    for rate in (float(r) for r in args.rates.split(",") if r):
        row = simulate_rate(
            rate,
            args.detectors,
            args.days,
            args.false_alarm_days,
            rng,
            live_factor=args.live_factor,
            calibrate_on=args.calibrate_on,
        )
        rows.append(row)
        print(
            f"{rate:>5g}/s (reference {row['reference_rate']:g}/s, thresholds for "
            f"{row['calibrated_for']:.3g}/s)  {row['detectors']} detectors "
            f"({row['cusums']} CUSUMs) x "
            f"{row['days']:g} days = {row['observations'] / 1e6:.0f} M observations: "
            f"{row['pages']} pages = {row['pages_per_budget']:.2f} per {args.false_alarm_days:g} "
            f"days (95 % CI {row['ci_low']:.2f}-{row['ci_high']:.2f}; configured <= 1)",
            flush=True,
        )
    pages = sum(int(r["pages"]) for r in rows)
    exposure = sum(float(r["days"]) for r in rows)
    lo, hi = poisson_interval(pages)
    scale = args.false_alarm_days / exposure
    print(
        f"all rates: {pages} pages in {exposure:g} deployment-days = {pages * scale:.2f} per "
        f"{args.false_alarm_days:g} days (95 % CI {lo * scale:.2f}-{hi * scale:.2f}; "
        f"configured <= 1); wall {time.monotonic() - started:.0f} s"
    )
    print(
        json.dumps(
            {
                "false_alarm_days": args.false_alarm_days,
                "live_factor": args.live_factor,
                "calibrate_on": args.calibrate_on,
                "rows": rows,
                "pages": pages,
                "pages_per_budget": pages * scale,
                "ci": [lo * scale, hi * scale],
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
