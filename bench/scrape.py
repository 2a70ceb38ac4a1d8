"""What a Prometheus scrape of ``/metrics`` costs at the full label set.

Every series the exporter declares is filled at the worst case its labels allow: assistants up
to the exporter's cap (plus ``__other__``), the 8 metrics × 5 bands, three judges with every
failure reason, the drift signals, the baseline tiers, ... — then ``generate_latest`` (what the
``/metrics`` handler returns) is timed over several renders. Reported: the median render time,
the payload size, the number of samples, and as a same-run baseline the render time of one
plain counter holding the same number of samples (prometheus_client's own floor per sample).

    .venv/bin/python bench/scrape.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from prometheus_client import CollectorRegistry, Counter, generate_latest  # noqa: E402
from prometheus_client.metrics import MetricWrapperBase  # noqa: E402

from monitor.exporter import DEFAULT_MAX_LABEL_VALUES, Metrics  # noqa: E402
from monitor.judging.judge import FAILURE_REASONS  # noqa: E402
from monitor.models import METRICS, Band  # noqa: E402

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


def fill(metrics: Metrics) -> int:
    """Create every label combination of every declared metric; returns how many series."""
    series = 0
    for value in vars(metrics).values():
        if not isinstance(value, MetricWrapperBase):
            continue
        names = value._labelnames
        if not names:
            continue
        for combo in itertools.product(*(label_domain(n) for n in names)):
            child: Any = value.labels(*combo)
            kind = value._type
            if kind == "histogram":
                child.observe(0.5)
            elif kind == "counter":
                child.inc()
            elif kind == "gauge":
                child.set(1.0)
            series += 1
    return series


def median_render_ms(registry: CollectorRegistry, repeat: int) -> tuple[float, int]:
    times = []
    size = 0
    for _ in range(repeat):
        start = time.perf_counter()
        size = len(generate_latest(registry))
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)

    registry = CollectorRegistry()
    metrics = Metrics(registry)
    series = fill(metrics)
    samples = sum(len(m.samples) for m in registry.collect())
    render_ms, size = median_render_ms(registry, args.repeat)

    baseline_registry = CollectorRegistry()
    plain = Counter("plain", "baseline", ["i"], registry=baseline_registry)
    for i in range(samples):
        plain.labels(str(i)).inc()
    baseline_ms, _ = median_render_ms(baseline_registry, args.repeat)

    print(f"series (label combinations): {series:,}")
    print(f"samples rendered:            {samples:,}")
    print(f"/metrics payload:            {size / 1024:,.0f} KiB")
    print(f"render (median of {args.repeat}):       {render_ms:.1f} ms (target < {TARGET_MS:g} ms)")
    print(
        f"plain counter, same samples: {baseline_ms:.1f} ms -> ratio {render_ms / baseline_ms:.2f}"
    )
    print(
        json.dumps(
            {
                "bench": "scrape",
                "series": series,
                "samples": samples,
                "payload_bytes": size,
                "render_ms": round(render_ms, 2),
                "baseline_render_ms": round(baseline_ms, 2),
                "ratio_to_baseline": round(render_ms / baseline_ms, 3),
                "meets_target": render_ms < TARGET_MS,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
