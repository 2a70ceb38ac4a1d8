"""A real Prometheus scrapes ``/metrics`` (``Exposition``, OpenMetrics and gzip as Prometheus
negotiates them) and reads back what the exporter holds: label values with quotes, newlines
and backslashes, NaN, the +Inf bucket, a counter past 1e6 (Go's exponent form), and a value
changed between two scrapes (the render cache must not serve the old one)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from monitor.demo.prometheus_api import Sample
from monitor.demo.prometheus_stack import PrometheusStack
from monitor.jobs.recorders import DriftRecorder
from monitor.metrics.exporter import Metrics
from monitor.metrics.scrape_body import Exposition, negotiate
from monitor.stream.http import Heartbeat, ProbeApp, ProbeServer
from monitor.stream.recorder import StreamRecorder
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

TRICKY = 'say "hi"\\now\nplease'


class _Recording(ProbeApp):
    """The app, remembering the headers of the last /metrics request (what Prometheus asks)."""

    accept: tuple[str, str] = ("", "")

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/metrics":
            self.accept = (environ.get("HTTP_ACCEPT", ""), environ.get("HTTP_ACCEPT_ENCODING", ""))
        return super().__call__(environ, start_response)


@pytest.fixture
def scraped(
    prometheus_bins: None,
) -> Iterator[tuple[PrometheusStack, Metrics, CollectorRegistry, _Recording]]:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    StreamRecorder(metrics).record_tripwire(TRICKY, checked=2, mismatches=[("order_id", 1)])
    metrics.judge_tokens.labels("primary-a", "input").inc(2_500_000)
    metrics.judge_latency.labels("primary-a").observe(1e9)  # only the +Inf bucket
    DriftRecorder(metrics).record_drift_signal(
        "a", "s_final", q_value=None, effect=-0.25, detected=True
    )
    app = _Recording(registry, Heartbeat(), {})
    with (
        ProbeServer(app, "127.0.0.1", 0) as srv,
        PrometheusStack([srv.url], scrape_interval_s=1.0) as stack,
    ):
        yield stack, metrics, registry, app


def _value(stack: PrometheusStack, expr: str) -> float | None:
    result: list[Sample] = stack.query(expr)
    return result[0].value if len(result) == 1 else None


def test_prometheus_reads_back_what_the_exporter_holds(
    scraped: tuple[PrometheusStack, Metrics, CollectorRegistry, _Recording],
) -> None:
    stack, metrics, registry, app = scraped
    wait_for(lambda: _value(stack, "casewatch_build_info") == 1.0, "a first scrape")
    assert stack.targets_up()
    accept, encoding = app.accept
    assert negotiate(accept).openmetrics, accept  # the OpenMetrics path, gzipped
    assert "gzip" in encoding
    promql_label = TRICKY.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    assert _value(stack, f'casewatch_tripwire_checked_total{{assistant="{promql_label}"}}') == 2
    mismatch = f'casewatch_identifier_mismatch_total{{assistant="{promql_label}"}}'
    assert _value(stack, mismatch) == 1
    assert _value(stack, 'casewatch_judge_tokens_total{kind="input"}') == 2_500_000
    inf_bucket = 'casewatch_judge_latency_seconds_bucket{judge="primary-a",le="+Inf"}'
    assert _value(stack, inf_bucket) == 1
    assert _value(stack, 'casewatch_judge_latency_seconds_bucket{le="120.0"}') == 0
    pvalue = _value(stack, 'casewatch_drift_pvalue{assistant="a"}')
    assert pvalue is not None and math.isnan(pvalue)
    assert _value(stack, 'casewatch_drift_effect{assistant="a"}') == -0.25

    # Every sample of the body was ingested, no more, no less.
    text = Exposition(registry).render().decode()
    samples = sum(len(f.samples) for f in text_string_to_metric_families(text))
    wait_for(
        lambda: _value(stack, "scrape_samples_scraped") == samples, f"{samples} samples scraped"
    )

    # A change after a scrape shows up in the next one.
    StreamRecorder(metrics).record_tripwire(TRICKY, checked=5)
    checked = f'casewatch_tripwire_checked_total{{assistant="{promql_label}"}}'
    wait_for(lambda: _value(stack, checked) == 7, "the updated counter")
