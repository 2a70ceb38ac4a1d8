"""What a Prometheus scrape of ``/metrics`` costs at the full label set.

Every series the exporter declares is filled at the worst case its labels allow: assistants up
to the exporter's cap (plus ``__other__``), the 8 metrics × 5 bands, three judges with every
failure reason, the drift signals, the baseline tiers, ... Then, over ``--rounds`` interleaved
rounds, each of which first changes EVERY series (counters + 1..3, a new observation in every
histogram, every gauge set to a new random value: the worst case between two scrapes):

- old: prometheus_client's ``generate_latest`` (what ``/metrics`` served before ``Exposition``);
- new: ``monitor.metrics.scrape_body.Exposition.render`` with every series changed, then again with
  nothing changed (the body is checked byte for byte against ``generate_latest``), then with
  only the families live traffic updates changed (``TRAFFIC``: per turn and per verdict; the
  drift, baseline and rubric families change when their jobs run);
- cold: a fresh ``Exposition``'s first render (once per process and per new series);
- gzip of the body at level 1 (``/metrics`` now) and 9 (prometheus_client's);
- the same-run baseline: ``generate_latest`` of one plain counter holding as many samples
  (prometheus_client's own floor per sample).

Reported: medians over the rounds, the payload size, the number of samples.

    .venv/bin/python bench/scrape.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from prometheus_client import CollectorRegistry, Counter, generate_latest  # noqa: E402
from prometheus_client.metrics import MetricWrapperBase  # noqa: E402

from monitor.judging.judge import FAILURE_REASONS  # noqa: E402
from monitor.metrics.exporter import DEFAULT_MAX_LABEL_VALUES, Metrics, disable_created_series  # noqa: E402
from monitor.metrics.scrape_body import Exposition  # noqa: E402
from monitor.schema.turn import METRICS, Band  # noqa: E402

TARGET_MS = 20.0
JUDGES = ("primary-a", "primary-b", "arbiter")


def label_domain(label: str) -> list[str]:
    """The values one label takes at worst (bounded by design: see the exporter's guards)."""
    domains: dict[str, list[str]] = {
        "assistant": [f"assistant-{i}" for i in range(DEFAULT_MAX_LABEL_VALUES)] + ["__other__"],
        "metric": list(METRICS),
        "band": [b.value for b in Band] + ["judge_failed"],
        "judge": list(JUDGES),
        "reason": sorted(FAILURE_REASONS),
        "tier": ["high", "medium", "low"],
        "role": ["primary", "arbiter"],
        "kind": ["input", "output", "hard"],
        "outcome": ["ok", "failed", "skipped"],
        "topic": ["support.turns"],
        "partition": [str(p) for p in range(12)],
        "signal": [f"signal-{i}" for i in range(20)],
        "window": ["recent", "reference"],
        "job": ["retention", "drift", "baseline_tiers", "rubric"],
    }
    return domains.get(label, ["a", "b", "c"])


# What a scrape interval of live traffic changes: the families recorded per consumed turn and
# per verdict. The drift, baseline-tier and rubric families change when their jobs run (hourly).
TRAFFIC = frozenset(
    {
        "casewatch_turns_sampled",
        "casewatch_turns_skipped",
        "casewatch_turns_judged",
        "casewatch_metric_band",
        "casewatch_metric_band_weight",
        "casewatch_score_final",
        "casewatch_metric_score",
        "casewatch_judge_requests",
        "casewatch_judge_retries",
        "casewatch_judge_failed",
        "casewatch_judge_latency_seconds",
        "casewatch_judge_tokens",
        "casewatch_judge_cost_usd",
        "casewatch_panel_turns",
        "casewatch_disagreements",
        "casewatch_arbiter_calls",
        "casewatch_arbitration_outcome",
        "casewatch_tripwire_checked",
        "casewatch_identifier_mismatch",
    }
)


def fill(metrics: Metrics, rng: random.Random, only: frozenset[str] | None = None) -> int:
    """Create (or change) every label combination of every declared metric (of ``only``'s
    families, if given); returns how many series. Values as a live daemon would hold them:
    counters grow by small integers, every histogram gets an observation in [0, 1), gauges
    are arbitrary floats (NaN sometimes, as the drift p-values are with too little data)."""
    series = 0
    for wrapper in vars(metrics).values():
        if not isinstance(wrapper, MetricWrapperBase):
            continue
        names = wrapper._labelnames
        if not names or (only is not None and wrapper._name not in only):
            continue
        for combo in itertools.product(*(label_domain(n) for n in names)):
            child: Any = wrapper.labels(*combo)
            kind = wrapper._type
            if kind == "histogram":
                child.observe(rng.random())
            elif kind == "counter":
                child.inc(rng.randint(1, 3))
            elif kind == "gauge":
                child.set(math.nan if rng.random() < 0.05 else rng.random() * 100)
            series += 1
    return series


STEPS = (
    ("baseline", "plain counter, same samples (generate_latest)"),
    ("old", "old: generate_latest"),
    ("new", "new: every series changed"),
    ("unchanged", "new: nothing changed"),
    ("traffic", "new: traffic families changed (TRAFFIC)"),
    ("cold", "new: first render (cold)"),
    ("gzip1", "gzip level 1 of the body"),
    ("gzip9", "gzip level 9 of the body"),
)


class Timings:
    """Wall and thread CPU time (less of the scheduler's noise on a shared machine) per step."""

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {key: [] for key, _ in STEPS}
        self.cpu: dict[str, list[float]] = {key: [] for key, _ in STEPS}

    def run(self, key: str, step: Callable[[], bytes]) -> bytes:
        wall, cpu = time.perf_counter(), time.thread_time()
        body = step()
        self.cpu[key].append((time.thread_time() - cpu) * 1000)
        self.wall[key].append((time.perf_counter() - wall) * 1000)
        return body

    def medians(self, cpu: bool) -> dict[str, float]:
        return {k: statistics.median(v) for k, v in (self.cpu if cpu else self.wall).items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)

    disable_created_series()  # as the daemon serves it
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    rng = random.Random(12)
    series = fill(metrics, rng)
    samples = sum(len(m.samples) for m in registry.collect())
    baseline_registry = CollectorRegistry()
    plain = Counter("plain", "baseline", ["i"], registry=baseline_registry)
    for i in range(samples):
        plain.labels(str(i)).inc()

    exposition = Exposition(registry)
    exposition.render()
    t = Timings()
    size = gzip1_size = gzip9_size = 0
    for _ in range(args.rounds):
        fill(metrics, rng)  # every series changes
        old_body = t.run("old", lambda: generate_latest(registry))
        body = t.run("new", exposition.render)
        if body != old_body:
            raise SystemExit("Exposition.render differs from generate_latest: not a valid bench")
        t.run("unchanged", exposition.render)
        fill(metrics, rng, only=TRAFFIC)
        t.run("traffic", exposition.render)
        t.run("cold", Exposition(registry).render)
        t.run("baseline", lambda: generate_latest(baseline_registry))
        gzip1_size = len(t.run("gzip1", partial(gzip.compress, body, compresslevel=1)))
        gzip9_size = len(t.run("gzip9", partial(gzip.compress, body, compresslevel=9)))
        size = len(body)
    wall, cpu = t.medians(cpu=False), t.medians(cpu=True)

    print(f"series (label combinations): {series:,}")
    print(f"samples rendered:            {samples:,}")
    print(
        f"/metrics payload:            {size / 1024:,.0f} KiB (gzip -1: {gzip1_size / 1024:,.0f}"
        f" KiB, gzip -9: {gzip9_size / 1024:,.0f} KiB)"
    )
    print(f"medians of {args.rounds} interleaved rounds; ratios to the plain counter")
    print(f"  {'':<46} {'wall ms':>8} {'ratio':>6} {'CPU ms':>8} {'ratio':>6}")
    for key, label in STEPS:
        print(
            f"  {label:<46} {wall[key]:8.1f} {wall[key] / wall['baseline']:6.3f}"
            f" {cpu[key]:8.1f} {cpu[key] / cpu['baseline']:6.3f}"
        )
    print(
        f"target: render < {TARGET_MS:g} ms (every series changed, wall): "
        f"{'met' if wall['new'] < TARGET_MS else 'NOT met'}"
    )
    result: dict[str, object] = {
        "bench": "scrape",
        "rounds": args.rounds,
        "series": series,
        "samples": samples,
        "payload_bytes": size,
        "gzip1_bytes": gzip1_size,
        "gzip9_bytes": gzip9_size,
    }
    for key, _ in STEPS:
        result[f"{key}_ms"] = round(wall[key], 2)
        result[f"{key}_cpu_ms"] = round(cpu[key], 2)
    result |= {
        "ratio_to_baseline": round(wall["new"] / wall["baseline"], 4),
        "cpu_ratio_to_baseline": round(cpu["new"] / cpu["baseline"], 4),
        "old_ratio_to_baseline": round(wall["old"] / wall["baseline"], 3),
        "speedup": round(wall["old"] / wall["new"], 1),
        "meets_target": wall["new"] < TARGET_MS,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
