"""Time to detect a severe-share regression on a real Prometheus with rules/ loaded.

Per judged-turn rate (default 0.5, 2 and 10 judged turns/s: turn volume x sample rate) and
regressed rate (``--steps``, default 10 %, 15 % and 25 %), ``--runs`` (10) assistants
``step-<rate>-<p1>-<i>`` are streamed whose severe rate steps from ``--p0`` (5 %) to p1 at one
known moment (independent replicates of the cell), and ``--controls`` (5) ``flat-<rate>-<i>``,
which stay at 5 % throughout (the false-alarm control).

Two detectors watch every stream. The burn-rate alerts, as before. And the sequential detectors of
Each stream's judged turns, in order, go through ``monitor.stats.detection.Detector``
every ``--job-interval`` (15 s production, the job's default), calibrated as the job calibrates them
(baseline from a simulated 7-day reference window, the false-alarm budget of one per ``--arl0-days``
for a deployment of ``--deployment-detectors`` (assistant, signal) pairs; the replicate streams are
repetitions, not one deployment), and their gauges (``monitor.jobs.recorders.DetectionRecorder``)
are scraped by the same Prometheus, which fires CasewatchQualityRegressionDetected from rules/. Not
in the loop: the SQL store and the job's cursor (the judged turns go straight to the detector, as
the exporter's counters do for the burn-rate alerts). Each judged turn is a Bernoulli draw (severe
or not), counted on ``casewatch_turns_judged_total{assistant,band}`` of the real exporter
(``monitor.metrics.exporter``), served over HTTP and scraped by Debian's Prometheus, which
evaluates rules/
(the quality groups: objective, severe-share recording rules and burn-rate alerts) and sends alerts
to Alertmanager. Measured: wall time from the step to the first severe-share alert seen ``firing``
in Prometheus (polled every 0.1 s), and how many alerts ever fire for the flat streams (and for the
step streams before their step).

Honest about time: everything runs in REAL wall time, compressed by a stated ``--factor`` K
(default 240). The rules are a rewritten copy of rules/ where every range window (``[6h]`` ...)
and every ``for:`` is divided by K; the judged-turn rates are multiplied by K, so every window
holds the same number of turns as in production; the scrape and evaluation interval is 0.25 s
wall (= 60 s production at K = 240). Thresholds, objective and volume guards are unchanged.
Reported times are wall times multiplied back by K ("production seconds"). The baseline runs
for the longest window (6 h production) before the step, so every window is full of baseline.

The reference is the optimal sequential test for the same problem, an oracle that knows p1: a
single CUSUM on the Bernoulli observations (p0 -> p1) whose threshold gives at most one false
alarm per ``--arl0-days`` (default 30) days at that judged-turn rate, calibrated with the same
Brook-Evans chain (tighter than Lorden's h = ln(ARL0), so its delay is shorter
than Lorden's); its delay is the chain's zero-state ARL under p1, divided by the rate. The
ratio is measured median delay / oracle delay. The pipeline's own latency (one job interval +
one scrape + one rule evaluation, production time) is reported beside it: the target
is median <= 1.5 x oracle + that latency. "detector" columns are the time the detector raised
its alarm (before export, scrape and evaluation); "alert" the first poll that saw it firing.

    .venv/bin/python bench/time_to_detect.py [--factor 240] [--rates 0.5,2,10] [--runs 10]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from prometheus_client import CollectorRegistry, start_http_server  # noqa: E402

from monitor.demo.prometheus_config import format_duration, parse_duration  # noqa: E402
from monitor.demo.prometheus_stack import PrometheusStack  # noqa: E402
from monitor.jobs.recorders import DetectionRecorder  # noqa: E402
from monitor.metrics.exporter import Metrics, disable_created_series  # noqa: E402
from monitor.schema.turn import Band  # noqa: E402
from monitor.stats.cusum_calibration import (  # noqa: E402
    Calibration,
    calibrate,
    expected_delay,
    threshold,
)
from monitor.stats.detection import DEFAULT_SHIFTS, Detector  # noqa: E402

RULES = ROOT / "rules" / "casewatch.rules.yml"
SEVERE_ALERTS = ("CasewatchSevereShareBurnRateHigh", "CasewatchSevereShareBurnRateElevated")
DETECTOR_ALERT = "CasewatchQualityRegressionDetected"
TICK_S = 0.05  # how often the simulated stream adds its judged turns
POLL_S = 0.1  # how often Prometheus' alerts are read
SCRAPE_S = 0.25  # wall; x factor in production seconds
_RANGE = re.compile(r"\[([0-9a-z]+)(?::([0-9a-z]+))?\]")


def scale_rules(doc: dict[str, Any], factor: float) -> dict[str, Any]:
    """The quality groups of a rules document with every range window, subquery step and
    ``for:`` divided by ``factor`` (thresholds, objective and volume guards unchanged)."""

    def scaled(text: str) -> str:
        return format_duration(parse_duration(text) / factor)

    def window(match: re.Match[str]) -> str:
        rng, step = match.group(1), match.group(2)
        return f"[{scaled(rng)}" + (f":{scaled(step)}]" if step else "]")

    groups = []
    for group in doc["groups"]:
        if not str(group["name"]).startswith("casewatch.quality"):
            continue
        rules = []
        for rule in group["rules"]:
            rule = dict(rule)
            rule["expr"] = _RANGE.sub(window, str(rule["expr"]))
            if "for" in rule:
                rule["for"] = scaled(str(rule["for"]))
            rules.append(rule)
        groups.append({**group, "rules": rules})
    return {"groups": groups}


def kl_bernoulli(p1: float, p0: float) -> float:
    """KL(Bernoulli(p1) || Bernoulli(p0)) in nats."""
    return p1 * math.log(p1 / p0) + (1 - p1) * math.log((1 - p1) / (1 - p0))


def cusum_delay_s(rate: float, p0: float, p1: float, arl0_days: float) -> float:
    """Delay (s) of the oracle CUSUM for p0 -> p1 at one false alarm per ``arl0_days`` days:
    threshold from the Brook-Evans chain, zero-state ARL under p1, over the rate."""
    arl0_obs = rate * arl0_days * 86400.0
    h = threshold(p0, p1, arl0_obs)
    return expected_delay(p0, p1, h) / rate


def lorden_delay_s(rate: float, p0: float, p1: float, arl0_days: float) -> float:
    """Lorden's approximation: h = ln(ARL0), delay h / KL(p1 || p0) observations."""
    return math.log(rate * arl0_days * 86400.0) / kl_bernoulli(p1, p0) / rate


@dataclass
class Stream:
    """One assistant's judged turns: ``rate`` per production second, severe with ``p0``, and
    ``p1`` from ``step_at`` (wall, monotonic) when it has one."""

    name: str
    rate: float
    p1: float | None  # None: a flat control stream
    calibration: Calibration | None = None
    detector: Detector | None = None
    step_at: float | None = None
    carry: float = 0.0
    judged: int = 0
    severe: int = 0
    pending_x: list[np.ndarray] = field(default_factory=list)
    pending_t: list[np.ndarray] = field(default_factory=list)
    detector_at: float | None = None  # wall time the detector raised its alarm after the step
    detected: dict[str, float] = field(default_factory=dict)  # kind -> wall time of firing
    by: dict[str, str] = field(default_factory=dict)  # kind -> alert name
    false_alarms: dict[str, int] = field(default_factory=dict)  # kind -> firing episodes
    firing: set[str] = field(default_factory=set)  # alerts firing at the last poll

    @property
    def step(self) -> bool:
        return self.p1 is not None


def kind_of(alert: str) -> str | None:
    if alert in SEVERE_ALERTS:
        return "burn_rate"
    if alert == DETECTOR_ALERT:
        return "detector"
    return None


class Feeder(threading.Thread):
    """Adds each stream's judged turns to the exporter's counter every TICK_S of wall time,
    and queues them, in order, for the detector job."""

    def __init__(
        self,
        metrics: Metrics,
        streams: list[Stream],
        factor: float,
        p0: float,
        seed: int,
        started: float,
    ) -> None:
        super().__init__(daemon=True)
        self.metrics, self.streams, self.factor = metrics, streams, factor
        self.p0 = p0
        self.started = started
        self.rng = np.random.default_rng(seed)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        bands = [b.value for b in Band]
        for s in streams:  # every band series exists from 0 before the first scrape
            for band in bands:
                metrics.turns_judged.labels(assistant=s.name, band=band)

    def run(self) -> None:
        last = time.monotonic()
        while not self.stop.wait(TICK_S):
            now = time.monotonic()
            dt, last = now - last, now
            t0 = (now - self.started) * self.factor  # production seconds
            with self.lock:
                for s in self.streams:
                    s.carry += s.rate * self.factor * dt
                    n = int(s.carry)
                    s.carry -= n
                    if n == 0:
                        continue
                    stepped = s.step_at is not None and now >= s.step_at
                    p = s.p1 if stepped and s.p1 is not None else self.p0
                    x = self.rng.random(n) < p
                    k = int(x.sum())
                    s.judged += n
                    s.severe += k
                    turns = self.metrics.turns_judged
                    if k:
                        turns.labels(assistant=s.name, band=Band.SEVERE.value).inc(k)
                    if n - k:
                        turns.labels(assistant=s.name, band=Band.NONE.value).inc(n - k)
                    s.pending_x.append(x)
                    s.pending_t.append(t0 - dt * self.factor * (1 - np.arange(n) / n))

    def step(self, at: float) -> None:
        with self.lock:
            for s in self.streams:
                if s.step:
                    s.step_at = at


class DetectorJob(threading.Thread):
    """The detection job's work every ``interval`` of wall time: each stream's queued judged
    turns into its Detector, and the gauges set as ``monitor.jobs.detection`` sets them."""

    def __init__(self, feeder: Feeder, gauges: DetectionRecorder, interval_wall: float) -> None:
        super().__init__(daemon=True)
        self.feeder, self.gauges, self.interval = feeder, gauges, interval_wall
        self.stop = threading.Event()
        self.busy_s = 0.0

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            began = time.monotonic()
            with self.feeder.lock:
                batches = [(s, s.pending_x, s.pending_t) for s in self.feeder.streams]
                for s in self.feeder.streams:
                    s.pending_x, s.pending_t = [], []
            for s, xs, ts in batches:
                if s.detector is None or s.calibration is None:
                    continue
                if xs:
                    raised = s.detector.update(
                        np.concatenate(xs), np.concatenate(ts), s.calibration
                    )
                    stepped = s.step_at is not None and began >= s.step_at
                    if raised and stepped and s.detector_at is None:
                        s.detector_at = began
                latched = s.detector.latched
                self.gauges.record(
                    s.name,
                    "turn_severe",
                    armed=True,
                    statistic=s.detector.statistic(s.calibration),
                    alarm=latched is not None,
                    baseline_rate=s.calibration.p0,
                    rate_since=None if latched is None else latched.rate_since,
                    change_point=None if latched is None else latched.change_point,
                )
            self.gauges.record_run(time.time())
            self.busy_s += time.monotonic() - began


def observe(stack: PrometheusStack, streams: dict[str, Stream], now: float) -> None:
    """Record detections and false alarms per kind (each not-firing -> firing transition counts
    once)."""
    firing: dict[str, set[str]] = {name: set() for name in streams}
    for alert in stack.alerts():
        name = alert.labels.get("assistant", "")
        if kind_of(alert.name) and alert.state == "firing" and name in firing:
            firing[name].add(alert.name)
    for name, s in streams.items():
        stepped = s.step_at is not None and now >= s.step_at
        for alert_name in sorted(firing[name]):
            kind = kind_of(alert_name)
            if kind is None:
                continue
            if stepped:
                if kind not in s.detected:
                    s.detected[kind], s.by[kind] = now, alert_name
            elif alert_name not in s.firing:
                s.false_alarms[kind] = s.false_alarms.get(kind, 0) + 1
        s.firing = firing[name]


def _quantiles(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return float(np.median(values)), float(np.quantile(values, 0.9))


def _minutes(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x / 60:.1f} min" if x >= 60 else f"{x:.0f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", type=float, default=240.0, help="time compression K")
    parser.add_argument("--rates", default="0.5,2,10", help="judged turns per production second")
    parser.add_argument("--p0", type=float, default=0.05, help="baseline severe rate")
    parser.add_argument("--steps", default="0.10,0.15,0.25", help="regressed severe rates p1")
    parser.add_argument("--runs", type=int, default=10, help="step streams per (rate, p1) cell")
    parser.add_argument("--arl0-days", type=float, default=30.0, help="false-alarm period")
    parser.add_argument(
        "--deployment-detectors",
        type=int,
        default=16,
        help="(assistant, signal) pairs of the deployment the detectors are calibrated for",
    )
    parser.add_argument(
        "--job-interval", type=float, default=15.0, help="detection job interval (production s)"
    )
    parser.add_argument(
        "--max-wait-h", type=float, default=4.0, help="production hours to wait for detection"
    )
    parser.add_argument(
        "--controls", type=int, default=5, help="flat (no-regression) streams per rate"
    )
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    k = args.factor
    rates = [float(r) for r in args.rates.split(",") if r]
    steps = [float(p) for p in args.steps.split(",") if p]
    doc = scale_rules(yaml.safe_load(RULES.read_text()), k)
    longest = max(
        parse_duration(m.group(1))
        for g in yaml.safe_load(RULES.read_text())["groups"]
        if str(g["name"]).startswith("casewatch.quality")
        for r in g["rules"]
        for m in _RANGE.finditer(str(r["expr"]))
    )
    baseline_wall = longest / k + 4 * SCRAPE_S

    rng = np.random.default_rng(args.seed + 1)
    cusums = args.deployment_detectors * len(DEFAULT_SHIFTS)
    streams: list[Stream] = []
    for r in rates:
        for p1 in steps:
            streams += [Stream(f"step-{r:g}-{p1:g}-{i}", r, p1) for i in range(args.runs)]
        streams += [Stream(f"flat-{r:g}-{i}", r, None) for i in range(args.controls)]
    for s in streams:  # calibrated as the job does, from a simulated 7-day reference window
        ref_n = int(s.rate * 7 * 86400)
        p0_hat = (rng.binomial(ref_n, args.p0) + 0.5) / (ref_n + 1)
        s.calibration = calibrate(
            p0_hat,
            DEFAULT_SHIFTS,
            false_alarm_days=args.arl0_days,
            rate_per_s=s.rate,
            detectors=cusums,
        )
        s.detector = Detector(DEFAULT_SHIFTS)
    by_name = {s.name: s for s in streams}
    disable_created_series()  # as the daemon serves it
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    server, _thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    port = server.server_address[1]
    print(
        f"time compression K = {k:g}: windows and for: / K, judged-turn rates x K, "
        f"scrape = eval = {SCRAPE_S} s wall ({SCRAPE_S * k:g} s production); "
        f"baseline {baseline_wall:.0f} s wall ({longest / 3600:g} h production); "
        f"{len(streams)} streams; detectors calibrated for {args.deployment_detectors} "
        f"(assistant, signal) pairs x {len(DEFAULT_SHIFTS)} shifts",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="casewatch-ttd-") as tmp:
        rules = Path(tmp) / "casewatch.rules.yml"
        rules.write_text(yaml.safe_dump(doc, sort_keys=False))
        with PrometheusStack(
            [f"http://127.0.0.1:{port}"],
            rule_files=[rules],
            scrape_interval_s=SCRAPE_S,
            evaluation_interval_s=SCRAPE_S,
        ) as stack:
            deadline = time.monotonic() + 120
            while not stack.targets_up():
                if time.monotonic() > deadline:
                    raise SystemExit("Prometheus never scraped the exporter")
                time.sleep(POLL_S)
            errors = [r for r in stack.rules() if r.health == "err"]
            if errors:
                raise SystemExit(f"rules failed to evaluate: {errors}")
            started = time.monotonic()
            feeder = Feeder(metrics, streams, k, args.p0, args.seed, started)
            job = DetectorJob(feeder, DetectionRecorder(metrics), args.job_interval / k)
            feeder.start()
            job.start()
            step_at = started + baseline_wall
            while time.monotonic() < step_at:
                observe(stack, by_name, time.monotonic())
                time.sleep(POLL_S)
            feeder.step(step_at)
            print(f"step {args.p0:.0%} -> {steps} at t = {step_at - started:.1f} s", flush=True)
            end = step_at + args.max_wait_h * 3600 / k
            while time.monotonic() < end:
                observe(stack, by_name, time.monotonic())
                if all(len(s.detected) == 2 for s in streams if s.step):
                    break
                time.sleep(POLL_S)
            finished = time.monotonic()
            feeder.stop.set()
            job.stop.set()
            feeder.join()
            job.join()

    # Exposure of the false-alarm count: the flat streams all along, the step streams until
    # their step; in production days.
    exposure_days = sum(
        ((s.step_at if s.step and s.step_at else finished) - started) * k / 86400 for s in streams
    )
    latency_s = args.job_interval + 2 * SCRAPE_S * k  # one job interval + scrape + evaluation
    rows: list[dict[str, Any]] = []
    for r in rates:
        for p1 in steps:
            cell = [by_name[f"step-{r:g}-{p1:g}-{i}"] for i in range(args.runs)]
            oracle = cusum_delay_s(r, args.p0, p1, args.arl0_days)
            row: dict[str, Any] = {
                "judged_per_s": r,
                "p1": p1,
                "runs": len(cell),
                "oracle_delay_s": round(oracle, 1),
                "lorden_delay_s": round(lorden_delay_s(r, args.p0, p1, args.arl0_days), 1),
                "pipeline_latency_s": latency_s,
            }
            for kind, times in (
                ("detector_raw", [s.detector_at for s in cell]),
                ("detector", [s.detected.get("detector") for s in cell]),
                ("burn_rate", [s.detected.get("burn_rate") for s in cell]),
            ):
                delays = [(t - step_at) * k for t in times if t is not None]
                med, p90 = _quantiles(delays)
                row[f"{kind}_detected"] = len(delays)
                row[f"{kind}_median_s"] = None if med is None else round(med, 1)
                row[f"{kind}_p90_s"] = None if p90 is None else round(p90, 1)
                row[f"{kind}_ratio"] = None if med is None else round(med / oracle, 2)
            med = row["detector_median_s"]
            row["target_s"] = round(1.5 * oracle + latency_s, 1)
            row["within_target"] = med is not None and med <= row["target_s"]
            row["burn_rate_alerts"] = sorted(
                {s.by["burn_rate"] for s in cell if "burn_rate" in s.by}
            )
            rows.append(row)

    print()
    print(
        f"{'judged/s':>8} {'step':>9} {'oracle':>8} {'detector (raw)':>16} "
        f"{'alert median':>12} {'p90':>9} {'ratio':>6} {'target':>9} "
        f"{'burn-rate median':>16} {'p90':>9} {'ratio':>6}"
    )
    for row in rows:
        print(
            f"{row['judged_per_s']:>8g} {args.p0:.0%}->{row['p1']:.0%}".ljust(19)
            + f"{_minutes(row['oracle_delay_s']):>8} {_minutes(row['detector_raw_median_s']):>16} "
            f"{_minutes(row['detector_median_s']):>12} {_minutes(row['detector_p90_s']):>9} "
            f"{row['detector_ratio'] if row['detector_ratio'] is not None else '-':>6} "
            f"{_minutes(row['target_s']):>9} "
            f"{_minutes(row['burn_rate_median_s']):>16} {_minutes(row['burn_rate_p90_s']):>9} "
            f"{row['burn_rate_ratio'] if row['burn_rate_ratio'] is not None else '-':>6}"
            + (
                ""
                if row["burn_rate_detected"] == row["runs"]
                else f"  (burn rate fired in {row['burn_rate_detected']}/{row['runs']})"
            )
        )
    false = {
        kind: sum(s.false_alarms.get(kind, 0) for s in streams)
        for kind in ("detector", "burn_rate")
    }
    for kind, n in false.items():
        per_day = n / exposure_days if exposure_days else 0.0
        print(
            f"false alarms ({kind}): {n} in {exposure_days * 24:.1f} h of no-regression streams "
            f"(production time) = {per_day:.2f}/day"
            + ("" if n else f" (95 % upper bound {3 / exposure_days:.2f}/day)")
        )
    print(
        f"wall time {finished - started:.0f} s; resolution {POLL_S * k:g} s production; "
        f"pipeline latency {latency_s:g} s production; detector job busy "
        f"{job.busy_s / max(finished - started, 1e-9):.0%} of wall time"
    )
    result = {
        "factor": k,
        "p0": args.p0,
        "arl0_days": args.arl0_days,
        "deployment_detectors": args.deployment_detectors,
        "rows": rows,
        "false_alarms": false,
        "false_alarm_exposure_days": round(exposure_days, 3),
        "wall_seconds": round(finished - started, 1),
        "all_detected": all(row["detector_detected"] == row["runs"] for row in rows),
        "all_within_target": all(row["within_target"] for row in rows),
    }
    print(json.dumps(result))
    server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
