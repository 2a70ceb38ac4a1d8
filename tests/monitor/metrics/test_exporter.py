"""Metric declarations, read back from a fresh registry; recorders are tested beside their
feature (tests/monitor/{stream,judging,jobs}/test_recorder*.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Histogram

from monitor import __version__
from monitor.metrics.exporter import (
    HISTOGRAMS,
    METRIC_NAMES,
    SCORE_BUCKETS,
    LabelGuard,
    Metrics,
    is_declared,
)
from monitor.schema.turn import Band
from monitor.scoring.turn import BAND_BUCKET_BOUNDS, band

ROOT = Path(__file__).resolve().parents[3]
# The only modules that set metric values (see monitor/metrics/exporter.py).
RECORDERS = frozenset(
    {
        "monitor/metrics/exporter.py",
        "monitor/stream/recorder.py",
        "monitor/judging/recorder.py",
        "monitor/jobs/recorders.py",
    }
)


# Headline names users' rules and dashboards build on (docs/metrics.md): a
# rename or a lost declaration breaks this before it breaks someone's alert.
CONTRACT = (
    "casewatch_turns_consumed_total",
    "casewatch_turns_sampled_total",
    "casewatch_turns_judged_total",
    "casewatch_metric_band_total",
    "casewatch_score_final",
    "casewatch_metric_score",
    "casewatch_judge_requests_total",
    "casewatch_judge_failed_total",
    "casewatch_judge_latency_seconds",
    "casewatch_judge_tokens_total",
    "casewatch_judge_cost_usd_total",
    "casewatch_dead_letter_total",
    "casewatch_consumer_lag",
    "casewatch_drift_pvalue",
    "casewatch_drift_effect",
    "casewatch_drift_detected",
    "casewatch_baseline_win_rate",
    "casewatch_elo_rating",
    "casewatch_rubric_coverage",
    "casewatch_job_runs_total",
)


def test_the_contract_is_declared_and_counters_end_in_total(registry: CollectorRegistry) -> None:
    assert set(CONTRACT) <= set(METRIC_NAMES)
    Metrics(registry)
    for family in registry.collect():
        assert family.name.startswith("casewatch_")
        assert (f"{family.name}_total" in METRIC_NAMES) == (family.type == "counter")


def test_is_declared_accepts_histogram_series_only_for_histograms() -> None:
    assert is_declared("casewatch_score_final_bucket")
    assert is_declared("casewatch_judge_latency_seconds_count")
    assert is_declared("casewatch_turns_judged_total")
    assert not is_declared("casewatch_turns_judged_total_bucket")
    assert not is_declared("casewatch_nope_total")


@pytest.mark.parametrize(
    "score", [0.0, 0.3, 0.305, 0.30999, 0.31, 0.6, 0.605, 0.61, 0.85, 0.855, 0.86, 1.0]
)
def test_score_buckets_agree_with_the_band_edges(score: float) -> None:
    # 0.305 is severe but landed above the 0.3 bucket. Each band bound is a bucket,
    # and a score is at or below a band's bound exactly when its band is that one or worse.
    severe, moderate, minor = BAND_BUCKET_BOUNDS
    assert set(BAND_BUCKET_BOUNDS) | {1.0} <= set(SCORE_BUCKETS)
    for bound, worst_band in (
        (severe, Band.SEVERE),
        (moderate, Band.MODERATE),
        (minor, Band.MINOR),
    ):
        assert (score <= bound) == (band(score).rank <= worst_band.rank), (score, bound)


def test_a_severe_score_between_the_printed_edges_counts_in_the_severe_bucket() -> None:
    registry = CollectorRegistry()
    histogram = Histogram("s", "score", buckets=SCORE_BUCKETS, registry=registry)
    histogram.observe(0.305)
    severe = BAND_BUCKET_BOUNDS[0]
    assert registry.get_sample_value("s_bucket", {"le": str(severe)}) == 1.0


def test_build_info(registry: CollectorRegistry) -> None:
    Metrics(registry)
    assert registry.get_sample_value("casewatch_build_info", {"version": __version__}) == 1.0


def test_label_guard_truncates_and_validates() -> None:
    guard = LabelGuard(3)
    assert guard("x" * 500) == "x" * 64
    assert guard("") == "unknown"
    with pytest.raises(ValueError, match="max_values"):
        LabelGuard(0)


def test_two_instances_need_two_registries(registry: CollectorRegistry) -> None:
    Metrics(registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Metrics(registry)
    Metrics(CollectorRegistry())


def test_declared_names_follow_prometheus_naming() -> None:
    assert len(set(METRIC_NAMES)) == len(METRIC_NAMES)
    assert all(n.startswith("casewatch_") for n in METRIC_NAMES)
    assert {
        "casewatch_score_final",
        "casewatch_metric_score",
        "casewatch_judge_latency_seconds",
        "casewatch_rubric_coverage",
        "casewatch_case_score",
    } == HISTOGRAMS


def test_known_outcomes_are_exported_at_zero(registry: CollectorRegistry) -> None:
    Metrics(registry)
    assert registry.get_sample_value("casewatch_stored_total", {"outcome": "duplicate"}) == 0
    assert registry.get_sample_value("casewatch_stored_total", {"outcome": "inserted"}) == 0


def _metric_calls(path: Path, root: Path = ROOT) -> list[str]:
    """``x.labels(...)`` calls and ``.inc/.set/.observe/.remove`` on a ``Metrics`` attribute
    (``metrics.in_flight.set``) in one source file."""
    found = []
    families = set(vars(Metrics(CollectorRegistry())))
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        attr, owner = node.func.attr, node.func.value
        if attr == "labels" or (
            attr in {"inc", "dec", "set", "observe", "remove", "clear"}
            and isinstance(owner, ast.Attribute)
            and owner.attr in families
            and owner.attr != "registry"
        ):
            found.append(f"{path.relative_to(root)}:{node.lineno}: .{attr}()")
    return found


def test_only_recorders_set_metric_values() -> None:
    """Every series is set by its feature's recorder: one place bounds each label."""
    found = []
    for package in ("monitor", "consumers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if str(path.relative_to(ROOT)) not in RECORDERS:
                found += _metric_calls(path)
    assert found == []


def test_the_check_sees_a_raw_labels_call(tmp_path: Path) -> None:
    raw = tmp_path / "raw.py"
    raw.write_text(
        "def f(m):\n    m.judge_requests.labels('j', 'ok').inc()\n    m.in_flight.set(1)\n"
    )
    found = _metric_calls(raw, tmp_path)
    assert sorted(f.split(": ")[1] for f in found) == [".labels()", ".set()"]
