"""Time to detect a severe-share regression on a real Prometheus with rules/ loaded.

Per judged-turn rate (default 0.5, 2 and 10 judged turns/s: turn volume x sample rate), several
assistants are streamed: ``step-<rate>``, whose severe rate steps from ``--p0`` (5 %) to
``--p1`` (15 %) at a known moment, and ``--controls`` (5) ``flat-<rate>-<i>``, which stay at
5 % throughout (the false-alarm control). Each judged turn is a Bernoulli draw (severe or not),
counted on ``casewatch_turns_judged_total{assistant,band}`` of the real exporter
(``monitor.exporter``), served over HTTP and scraped by Debian's Prometheus, which evaluates
rules/ (the quality groups: objective, severe-share recording rules and burn-rate alerts) and
sends alerts to Alertmanager. Measured: wall time from the step to the first severe-share alert seen
``firing`` in Prometheus (polled every 0.1 s), and how many alerts ever fire for the flat
streams (and for the step streams before their step).

Honest about time: everything runs in REAL wall time, compressed by a stated ``--factor`` K
(default 240). The rules are a rewritten copy of rules/ where every range window (``[6h]`` ...)
and every ``for:`` is divided by K; the judged-turn rates are multiplied by K, so every window
holds the same number of turns as in production; the scrape and evaluation interval is 0.25 s
wall (= 60 s production at K = 240). Thresholds, objective and volume guards are unchanged.
Reported times are wall times multiplied back by K ("production seconds"). The baseline runs
for the longest window (6 h production) before the step, so every window is full of baseline.

The reference is the optimal sequential test for the same problem: a CUSUM on the Bernoulli
observations (p0 -> p1) with the threshold h = ln(ARL0) that gives at most one false alarm per
``--arl0-days`` (default 30) days at that judged-turn rate (Lorden's bound ARL0 >= e^h); its
expected delay is h / KL(p1 || p0) observations, divided by the judged-turn rate for seconds.
The ratio is measured delay / CUSUM delay (1.0 would be optimal).

    .venv/bin/python bench/time_to_detect.py [--factor 240] [--rates 0.5,2,10] [--seed 7]
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
from monitor.exporter import Metrics, disable_created_series  # noqa: E402
from monitor.models import Band  # noqa: E402

RULES = ROOT / "rules" / "casewatch.rules.yml"
SEVERE_ALERTS = ("CasewatchSevereShareBurnRateHigh", "CasewatchSevereShareBurnRateElevated")
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
    """Expected detection delay (s) of a Bernoulli CUSUM with threshold ln(ARL0 observations)."""
    arl0_obs = rate * arl0_days * 86400.0
    return math.log(arl0_obs) / kl_bernoulli(p1, p0) / rate


@dataclass
class Stream:
    """One assistant's judged turns: ``rate`` per production second, severe with ``p0``, and
    ``p1`` from ``step_at`` (wall, monotonic) when it has one."""

    name: str
    rate: float
    step: bool
    step_at: float | None = None
    carry: float = 0.0
    judged: int = 0
    severe: int = 0
    detected_at: float | None = None  # wall (monotonic) of the first firing after the step
    detected_by: str = ""
    false_alarms: int = 0  # firing episodes before any step (or ever, for a flat stream)
    firing: set[str] = field(default_factory=set)  # alerts firing at the last poll


class Feeder(threading.Thread):
    """Adds each stream's judged turns to the exporter's counter every TICK_S of wall time."""

    def __init__(
        self,
        metrics: Metrics,
        streams: list[Stream],
        factor: float,
        p0: float,
        p1: float,
        seed: int,
    ) -> None:
        super().__init__(daemon=True)
        self.metrics, self.streams, self.factor = metrics, streams, factor
        self.p0, self.p1 = p0, p1
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
            with self.lock:
                for s in self.streams:
                    s.carry += s.rate * self.factor * dt
                    n = int(s.carry)
                    s.carry -= n
                    if n == 0:
                        continue
                    stepped = s.step_at is not None and now >= s.step_at
                    k = int(self.rng.binomial(n, self.p1 if stepped else self.p0))
                    s.judged += n
                    s.severe += k
                    turns = self.metrics.turns_judged
                    if k:
                        turns.labels(assistant=s.name, band=Band.SEVERE.value).inc(k)
                    if n - k:
                        turns.labels(assistant=s.name, band=Band.NONE.value).inc(n - k)

    def step(self, at: float) -> None:
        with self.lock:
            for s in self.streams:
                if s.step:
                    s.step_at = at


def observe(stack: PrometheusStack, streams: dict[str, Stream], now: float) -> None:
    """Record detections and false alarms (each not-firing -> firing transition counts once)."""
    firing: dict[str, set[str]] = {name: set() for name in streams}
    for alert in stack.alerts():
        name = alert.labels.get("assistant", "")
        if alert.name in SEVERE_ALERTS and alert.state == "firing" and name in firing:
            firing[name].add(alert.name)
    for name, s in streams.items():
        stepped = s.step_at is not None and now >= s.step_at
        for alert_name in sorted(firing[name]):
            if stepped:
                if s.detected_at is None:
                    s.detected_at, s.detected_by = now, alert_name
            elif alert_name not in s.firing:
                s.false_alarms += 1
        s.firing = firing[name]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", type=float, default=240.0, help="time compression K")
    parser.add_argument("--rates", default="0.5,2,10", help="judged turns per production second")
    parser.add_argument("--p0", type=float, default=0.05, help="baseline severe rate")
    parser.add_argument("--p1", type=float, default=0.15, help="regressed severe rate")
    parser.add_argument("--arl0-days", type=float, default=30.0, help="CUSUM false-alarm period")
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
    doc = scale_rules(yaml.safe_load(RULES.read_text()), k)
    longest = max(
        parse_duration(m.group(1))
        for g in yaml.safe_load(RULES.read_text())["groups"]
        if str(g["name"]).startswith("casewatch.quality")
        for r in g["rules"]
        for m in _RANGE.finditer(str(r["expr"]))
    )
    baseline_wall = longest / k + 4 * SCRAPE_S

    streams = [
        Stream(name, r, name.startswith("step"))
        for r in rates
        for name in (f"step-{r:g}", *(f"flat-{r:g}-{i}" for i in range(args.controls)))
    ]
    by_name = {s.name: s for s in streams}
    disable_created_series()  # as the daemon serves it
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    server, _thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    port = server.server_address[1]
    print(
        f"time compression K = {k:g}: windows and for: / K, judged-turn rates x K, "
        f"scrape = eval = {SCRAPE_S} s wall ({SCRAPE_S * k:g} s production); "
        f"baseline {baseline_wall:.0f} s wall ({longest / 3600:g} h production)",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="casewatch-ttd-") as tmp:
        rules = Path(tmp) / "casewatch.rules.yml"
        rules.write_text(yaml.safe_dump(doc, sort_keys=False))
        feeder = Feeder(metrics, streams, k, args.p0, args.p1, args.seed)
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
            feeder.start()
            step_at = started + baseline_wall
            while time.monotonic() < step_at:
                observe(stack, by_name, time.monotonic())
                time.sleep(POLL_S)
            feeder.step(step_at)
            print(
                f"step {args.p0:.0%} -> {args.p1:.0%} at t = {step_at - started:.1f} s", flush=True
            )
            end = step_at + args.max_wait_h * 3600 / k
            while time.monotonic() < end:
                observe(stack, by_name, time.monotonic())
                if all(s.detected_at is not None for s in streams if s.step):
                    break
                time.sleep(POLL_S)
            finished = time.monotonic()
            feeder.stop.set()
            feeder.join()

    # Exposure of the false-alarm count: the flat streams all along, the step streams until
    # their step; in production days.
    exposure_days = sum(
        ((s.step_at if s.step and s.step_at else finished) - started) * k / 86400 for s in streams
    )
    false_alarms = sum(s.false_alarms for s in streams)
    rows: list[dict[str, Any]] = []
    for r in rates:
        s = by_name[f"step-{r:g}"]
        measured = None if s.detected_at is None else (s.detected_at - step_at) * k
        optimum = cusum_delay_s(r, args.p0, args.p1, args.arl0_days)
        rows.append(
            {
                "judged_per_s": r,
                "detected_by": s.detected_by or None,
                "delay_s": None if measured is None else round(measured),
                "cusum_delay_s": round(optimum, 1),
                "ratio_to_cusum": None if measured is None else round(measured / optimum, 1),
                "judged_turns": sum(x.judged for x in streams if x.rate == r),
            }
        )

    print()
    print(f"{'judged/s':>8}  {'alert':<38}  {'delay (prod)':>12}  {'CUSUM':>9}  {'ratio':>6}")
    for row in rows:
        delay = "not fired" if row["delay_s"] is None else f"{row['delay_s'] / 60:.1f} min"
        ratio = "-" if row["ratio_to_cusum"] is None else f"{row['ratio_to_cusum']:.1f}"
        print(
            f"{row['judged_per_s']:>8g}  {row['detected_by'] or '-':<38}  {delay:>12}  "
            f"{row['cusum_delay_s'] / 60:>5.1f} min  {ratio:>6}"
        )
    per_day = false_alarms / exposure_days if exposure_days else 0.0
    print(
        f"false alarms: {false_alarms} in {exposure_days * 24:.1f} h of no-regression streams "
        f"(production time) = {per_day:.2f}/day"
        + ("" if false_alarms else f" (95 % upper bound {3 / exposure_days:.2f}/day)")
    )
    print(f"wall time {finished - started:.0f} s; resolution {POLL_S * k:g} s production")
    result = {
        "factor": k,
        "p0": args.p0,
        "p1": args.p1,
        "arl0_days": args.arl0_days,
        "rows": rows,
        "false_alarms": false_alarms,
        "false_alarm_exposure_days": round(exposure_days, 3),
        "false_alarms_per_day": round(per_day, 3),
        "wall_seconds": round(finished - started, 1),
        "all_detected": all(row["delay_s"] is not None for row in rows),
    }
    print(json.dumps(result))
    server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
