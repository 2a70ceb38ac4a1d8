"""``Exposition`` serves exactly what prometheus_client would, for every registry state.

Every check renders with ``Exposition`` (its caches warm from the previous states) and with
prometheus_client's own encoder for the same negotiated format, then compares the bytes and,
parsed by prometheus_client's parsers, every family and sample.
"""

from __future__ import annotations

import difflib
import http.client
import math
import random
import threading
from collections.abc import Iterable, Iterator, MutableMapping
from typing import Any
from urllib.parse import urlsplit

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
from prometheus_client import values as client_values
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics import parser as openmetrics_parser
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from monitor.jobs.recorders import DriftRecorder, JobRunRecorder
from monitor.metrics.exporter import Metrics
from monitor.metrics.scrape_body import (
    PRIVATE_ATTRIBUTES,
    Exposition,
    missing_private_attributes,
    negotiate,
)
from monitor.stream.http import Heartbeat, ProbeApp, ProbeServer
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
    """Each entry of ``PRIVATE_ATTRIBUTES`` resolves on a real module or object: an upgrade
    that renames one fails here (and the daemon's scrapes fall back, see below)."""
    assert len(PRIVATE_ATTRIBUTES) == 22
    assert missing_private_attributes() == []


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


# ------------------------------------------------------------ a prometheus_client it cannot read


def _scrape(url: str, accept: str | None = None) -> tuple[int, str, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.request("GET", "/metrics", headers={"Accept": accept} if accept else {})
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type", ""), resp.read()
    finally:
        conn.close()


def _fallback_server(registry: CollectorRegistry) -> ProbeServer:
    recorder = StreamRecorder(Metrics(registry))
    recorder.record_consumed("turns", 3)
    app = ProbeApp(
        registry, Heartbeat(), {}, on_exposition_fallback=recorder.record_exposition_fallback
    )
    return ProbeServer(app, "127.0.0.1", 0)


def _fallbacks(registry: CollectorRegistry, reason: str) -> float | None:
    return registry.get_sample_value("casewatch_exposition_fallback_total", {"reason": reason})


def _fallback_warnings(logs: Iterable[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [e for e in logs if e["log_level"] == "warning" and "exposition" in e["event"]]


class _RenamedFloat(client_values.MutexValue):
    """A series' value as a release that renamed MutexValue's private float would keep it:
    prometheus_client's own render reads it through ``get()``, the fast path by name."""

    def __init__(self, value: float) -> None:
        self._float = value
        self._exemplar = None
        self._lock = threading.Lock()

    def get(self) -> float:
        with self._lock:
            return self._float


@pytest.mark.parametrize("accept", [None, PROMETHEUS_3_ACCEPT])
def test_a_private_attribute_missing_while_rendering_falls_back_to_the_library(
    registry: CollectorRegistry, monkeypatch: pytest.MonkeyPatch, accept: str | None
) -> None:
    """A series whose value object lacks ``_value``: scrapes over HTTP answer 200 with the
    library's bytes for the negotiated format, the fallback counted and warned about once."""
    with _fallback_server(registry) as srv, capture_logs() as logs:
        series: Any = registry._names_to_collectors["casewatch_turns_consumed"]
        monkeypatch.setattr(series.labels("turns"), "_value", _RenamedFloat(3.0))
        fmt = negotiate(accept)
        for _ in range(3):
            status, content_type, body = _scrape(srv.url, accept)
            assert status == 200 and content_type == fmt.content_type
            assert body == fmt.encoder(registry)
        assert b'casewatch_turns_consumed_total{topic="turns"} 3.0' in body
    assert _fallbacks(registry, "render_error") == 1
    assert _fallbacks(registry, "missing_attribute") == 0
    warnings = _fallback_warnings(logs)
    assert len(warnings) == 1
    assert warnings[0]["reason"] == "render_error" and "_value" in warnings[0]["error"]


def test_a_private_name_missing_at_start_falls_back_before_the_first_scrape(
    registry: CollectorRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module-level private gone (``values.ValueClass``, read when a series is created and
    by the fast path's check): found when the app is built, before any scrape."""
    StreamRecorder(Metrics(CollectorRegistry())).record_consumed("turns")  # built while present
    with capture_logs() as logs:
        monkeypatch.delattr(client_values, "ValueClass")
        # No metric can even be built to resolve the others on: they count as missing too.
        assert missing_private_attributes() == [
            n
            for n in PRIVATE_ATTRIBUTES
            if n.endswith(".ValueClass") or not n.startswith("prometheus_client.")
        ]
        monkeypatch.undo()
    assert _fallback_warnings(logs) == []  # resolving names says nothing by itself

    with capture_logs() as logs:
        registry_metrics = Metrics(registry)
        StreamRecorder(registry_metrics).record_consumed("turns", 2)
        monkeypatch.delattr(client_values, "ValueClass")
        app = ProbeApp(
            registry,
            Heartbeat(),
            {},
            on_exposition_fallback=StreamRecorder(registry_metrics).record_exposition_fallback,
        )
        assert _fallbacks(registry, "missing_attribute") == 1
        with ProbeServer(app, "127.0.0.1", 0) as srv:
            for accept in (None, "application/openmetrics-text"):
                status, _, body = _scrape(srv.url, accept)
                assert status == 200 and body == negotiate(accept).encoder(registry)
    assert _fallbacks(registry, "missing_attribute") == 1
    warnings = _fallback_warnings(logs)
    assert len(warnings) == 1 and warnings[0]["reason"] == "missing_attribute"
    assert warnings[0]["missing"][0] == "prometheus_client.values.ValueClass"


def test_an_error_of_a_collector_the_library_renders_is_not_a_fallback(
    registry: CollectorRegistry,
) -> None:
    """A custom collector that raises fails the library's render too: that is not the fast
    path's to hide, and it does not cost the fast path."""

    class Broken:
        def collect(self) -> Iterator[Metric]:
            raise AttributeError("the collector's own bug")

    seen: list[str] = []
    StreamRecorder(Metrics(registry)).record_consumed("turns")
    exposition = Exposition(registry, seen.append)
    registry.register(Broken())  # type: ignore[arg-type]
    with pytest.raises(AttributeError, match="own bug"):
        exposition.render()
    assert exposition.fallback is None and seen == []
