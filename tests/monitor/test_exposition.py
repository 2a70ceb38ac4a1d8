"""``Exposition`` serves exactly what prometheus_client would, for every registry state.

Every check renders with ``Exposition`` (its caches warm from the previous states) and with
prometheus_client's own encoder for the same negotiated format, then compares the bytes and,
parsed by prometheus_client's parsers, every family and sample.
"""

from __future__ import annotations

import difflib
import math
import random
from collections.abc import Iterable, Iterator

import pytest
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Enum,
    Gauge,
    Histogram,
    Info,
    Summary,
    disable_created_metrics,
    enable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics import parser as openmetrics_parser
from prometheus_client.parser import text_string_to_metric_families

from monitor.exporter import Metrics
from monitor.exposition import PRIVATE_ATTRIBUTES, Exposition, negotiate
from monitor.jobs.recorders import DriftRecorder, JobRunRecorder
from monitor.stream.recorder import StreamRecorder

PROMETHEUS_2_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
PROMETHEUS_3_ACCEPT = (
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,"
    "application/openmetrics-text;version=0.0.1;q=0.4,"
    "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"
)
ACCEPTS = (
    None,
    "text/plain",
    "text/plain;version=1.0.0;escaping=underscores",
    "text/plain;version=1.0.0;escaping=allow-utf-8",
    "text/plain;version=1.0.0;escaping=values",
    "text/plain;version=1.0.0;escaping=dots",  # rewrites names: prometheus_client renders it
    "application/openmetrics-text",
    "application/openmetrics-text;version=1.0.0",
    PROMETHEUS_2_ACCEPT,
    PROMETHEUS_3_ACCEPT,
)
TRICKY = ('quote"d', "back\\slash", "new\nline", "brace{}%s%%", "ünïcødé", "")


def _samples(text: str, openmetrics: bool) -> list[tuple[object, ...]]:
    """Every family and sample as parsed (a body the parser rejects, e.g. OpenMetrics with a
    histogram _sum of NaN, as the parser's error: prometheus_client serves it too)."""
    parse = (
        openmetrics_parser.text_string_to_metric_families
        if openmetrics
        else text_string_to_metric_families
    )
    try:
        parsed = list(parse(text))
    except ValueError as exc:
        return [("rejected by the parser", str(exc))]
    families: list[tuple[object, ...]] = []
    for family in parsed:
        samples = [
            (
                s.name,
                tuple(sorted(s.labels.items())),
                "NaN" if math.isnan(s.value) else s.value,
                s.exemplar,
            )
            for s in family.samples
        ]
        families.append((family.name, family.type, family.documentation, samples))
    return families


def assert_served_as_prometheus_client(
    registry: CollectorRegistry, exposition: Exposition, accepts: Iterable[str | None] = ACCEPTS
) -> None:
    for accept in accepts:
        fmt = negotiate(accept)
        ours = exposition.render(fmt)
        theirs = fmt.encoder(registry)
        if ours != theirs:
            diff = difflib.unified_diff(
                theirs.decode().splitlines(True), ours.decode().splitlines(True), "theirs", "ours"
            )
            pytest.fail(f"Accept: {accept!r}\n{''.join(diff)}")
        assert _samples(ours.decode(), fmt.openmetrics) == _samples(
            theirs.decode(), fmt.openmetrics
        )


def test_the_private_attributes_the_fast_path_reads_still_exist() -> None:
    """Each entry of ``PRIVATE_ATTRIBUTES`` resolved on a real module or object: an upgrade
    that renames one fails here, before a scrape falls over."""
    import importlib

    registry = CollectorRegistry()
    counter = Counter("c", "c", ["l"], registry=registry)
    gauge = Gauge("g", "g", ["l"], registry=registry)
    function = Gauge("f", "f", registry=registry)
    function.set_function(lambda: 1.0)
    histogram = Histogram("h", "h", ["l"], registry=registry)
    owners: dict[str, object] = {
        "CollectorRegistry": registry,
        "Counter": counter,
        "Counter.child": counter.labels("x"),
        "Gauge.child": gauge.labels("x"),
        "Gauge.function": function,
        "Histogram": histogram,
        "Histogram.child": histogram.labels("x"),
        "MutexValue": counter.labels("x")._value,
    }
    for dotted in PRIVATE_ATTRIBUTES:
        owner, attribute = dotted.rsplit(".", 1)
        obj = owners[owner] if owner in owners else importlib.import_module(owner)
        assert hasattr(obj, attribute), f"prometheus_client no longer has {dotted}"


def test_negotiation_matches_prometheus_client() -> None:
    assert negotiate(None).content_type == "text/plain; version=0.0.4; charset=utf-8"
    assert not negotiate(None).openmetrics
    om = negotiate(PROMETHEUS_3_ACCEPT)
    assert om.openmetrics and om.fast
    assert om.content_type.startswith("application/openmetrics-text; version=1.0.0")
    assert negotiate("text/plain;version=1.0.0;escaping=allow-utf-8").fast
    assert not negotiate("text/plain;version=1.0.0;escaping=dots").fast


def test_every_exporter_state_is_served_as_prometheus_client(registry: CollectorRegistry) -> None:
    metrics = Metrics(registry, max_assistants=5)
    stream, drift = StreamRecorder(metrics), DriftRecorder(metrics)
    exposition = Exposition(registry)
    assert_served_as_prometheus_client(registry, exposition)  # fresh: build_info, primes

    stream.prime(topics=["turns"], dead_letter_reasons=["bad_json"])
    stream.record_consumed("turns", 3)
    for name in TRICKY:
        stream.record_tripwire(name, checked=2, mismatches=[("order_id", 1)])
        drift.record_drift_signal(name, "s_final", q_value=None, effect=-0.0, detected=False)
        drift.record_drift_windows(name, recent=10, reference=0)
    metrics.judge_tokens.labels("primary-a", "input").inc(2_500_000)  # >= 1e6: Go exponent
    metrics.judge_cost.labels("primary-a").inc(0.1)
    metrics.judge_cost.labels("primary-a").inc(0.2)  # 0.30000000000000004
    metrics.judge_latency.labels("primary-a").observe(1e9)  # only the +Inf bucket
    metrics.judge_latency.labels("arbiter").observe(math.inf)  # _sum +Inf
    metrics.metric_score.labels("a", "accuracy").observe(math.nan)  # no bucket, _sum NaN
    metrics.metric_score.labels("a", "tone").observe(-1.0)
    metrics.score_final.labels("b").observe(0.85)  # on a bucket edge
    stream.set_lag([(("turns", 0), 5), (("turns", 1), 0), (("turns", 2), 12)])
    JobRunRecorder(metrics).record_job_run("drift", "ok", 1.7e9)
    metrics.drift_effect.labels("a", "inf").set(math.inf)
    metrics.drift_effect.labels("a", "-inf").set(-math.inf)
    metrics.drift_effect.labels("a", "tiny").set(1e-7)
    metrics.in_flight.set(7)
    assert_served_as_prometheus_client(registry, exposition)
    assert_served_as_prometheus_client(registry, exposition)  # nothing changed

    stream.set_lag([(("turns", 1), 3)])  # two series removed, one changed
    drift.forget_drift(TRICKY[0])
    metrics.metric_band.labels("a", "accuracy", "severe").inc()
    metrics.drift_effect.remove("a", "tiny")
    metrics.drift_effect.labels("a", "tiny").set(2.0)  # same labels, a new series
    metrics.judge_cost.clear()
    metrics.judge_latency.labels("primary-a").observe(0.3)
    assert_served_as_prometheus_client(registry, exposition)

    metrics.judge_cost.labels("primary-a").inc(0)  # same value, a new float object
    metrics.drift_pvalue.labels("a", "s_final").set(math.nan)  # a new NaN object
    assert_served_as_prometheus_client(registry, exposition)


def _other_collectors(registry: CollectorRegistry) -> None:
    Info("casewatch_test_info", "info", registry=registry).info({"k": "v"})
    Enum("casewatch_test_state", "enum", states=["a", "b"], registry=registry).state("b")
    Summary("casewatch_test_summary", "summary", ["x"], registry=registry).labels("1").observe(2)
    Gauge("casewatch:colon_name", "a colon in the name", registry=registry).set(1)

    class Custom:
        def collect(self) -> Iterator[Metric]:
            yield GaugeMetricFamily("casewatch_custom", 'custom\\help\nwith "quotes"', value=3)

    registry.register(Custom())  # type: ignore[arg-type]


def test_collectors_outside_the_fast_path_are_rendered_in_registry_order() -> None:
    registry = CollectorRegistry(target_info={"service": "casewatch"})
    Counter("casewatch_first", "before the others", ["x"], registry=registry).labels("1").inc()
    _other_collectors(registry)
    metrics = StreamRecorder(Metrics(registry))
    metrics.record_consumed("turns")
    exposition = Exposition(registry)
    assert_served_as_prometheus_client(registry, exposition)
    metrics.record_consumed("turns")
    assert_served_as_prometheus_client(registry, exposition)


def test_exemplars_and_set_function_gauges_fall_back_to_prometheus_client(
    registry: CollectorRegistry,
) -> None:
    counter = Counter("casewatch_ex", "exemplars", ["x"], registry=registry)
    histogram = Histogram("casewatch_ex_seconds", "exemplars", registry=registry)
    gauge = Gauge("casewatch_fn", "computed", ["x"], registry=registry)
    exposition = Exposition(registry)
    counter.labels("1").inc()
    histogram.observe(0.2)
    gauge.labels("1").set(4)
    assert_served_as_prometheus_client(registry, exposition)
    counter.labels("1").inc(exemplar={"trace_id": "abc"})
    histogram.observe(0.3, exemplar={"trace_id": "def"})
    gauge.labels("2").set_function(lambda: 42.0)  # its stored value stays 0.0
    assert_served_as_prometheus_client(registry, exposition)
    assert b'trace_id="abc"' in exposition.render(negotiate("application/openmetrics-text"))
    assert b'casewatch_fn{x="2"} 42.0' in exposition.render()


def test_created_samples_when_enabled(registry: CollectorRegistry) -> None:
    StreamRecorder(Metrics(registry)).record_consumed("turns")
    exposition = Exposition(registry)
    enable_created_metrics()  # type: ignore[no-untyped-call]
    try:
        assert_served_as_prometheus_client(registry, exposition)
    finally:
        disable_created_metrics()  # type: ignore[no-untyped-call]
    assert_served_as_prometheus_client(registry, exposition)


def test_unregistered_collectors_disappear(registry: CollectorRegistry) -> None:
    gone = Counter("casewatch_gone", "unregistered below", registry=registry)
    gone.inc()
    Metrics(registry)
    exposition = Exposition(registry)
    assert b"casewatch_gone_total" in exposition.render()
    registry.unregister(gone)
    assert b"casewatch_gone" not in exposition.render()
    assert_served_as_prometheus_client(registry, exposition)


@pytest.mark.parametrize("seed", range(16))
def test_random_updates_are_served_as_prometheus_client(seed: int) -> None:
    """Random series creation, updates, removals and clears, checked after every few steps."""
    rng = random.Random(seed)
    registry = CollectorRegistry()
    counter = Counter("casewatch_r", "random counter", ["a", "b"], registry=registry)
    gauge = Gauge("casewatch_r_gauge", "random gauge", ["a"], registry=registry)
    histogram = Histogram(
        "casewatch_r_seconds", "random histogram", ["a"], buckets=(0.5, 1, 10), registry=registry
    )
    plain = Gauge("casewatch_r_plain", "unlabelled", registry=registry)
    exposition = Exposition(registry)
    values = [0.0, -0.0, 1.0, 0.1, 1e6, 123456789.5, 1e-300, 1e300, math.inf, -math.inf, math.nan]
    labels = [*TRICKY, "x", "y"]
    for step in range(120):
        op = rng.randrange(8)
        a, b = rng.choice(labels), rng.choice(labels)
        if op == 0:
            counter.labels(a, b).inc(rng.choice([1, 0.5, 1e6, 0]))
        elif op == 1:
            gauge.labels(a).set(rng.choice(values))
        elif op == 2:
            histogram.labels(a).observe(rng.choice(values[:8]) * rng.choice([1, -1]))
        elif op == 3:
            plain.set(rng.choice(values))
        elif op == 4 and gauge._metrics:
            gauge.remove(*rng.choice(list(gauge._metrics)))
        elif op == 5 and counter._metrics:
            counter.remove(*rng.choice(list(counter._metrics)))
        elif op == 6 and rng.random() < 0.2:
            histogram.clear()
        else:
            gauge.labels(a).inc(rng.choice([1.5, -2.0]))
        if step % 3 == 0:
            accepts = (None, rng.choice(ACCEPTS))
            assert_served_as_prometheus_client(registry, exposition, accepts)
