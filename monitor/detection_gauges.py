"""The sequential detectors' gauges (issue 19), set by ``monitor.jobs.detection``.

Declared here and built by ``monitor.exporter.Metrics`` (as ``metrics.detection``) on its
registry; the names are in ``monitor.exporter.METRIC_NAMES`` with every other family.
Labels are bounded: ``assistant`` goes through the exporter's label guard, ``signal`` is
``turn_severe`` or ``<critical metric>_severe``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge

DETECTION_METRIC_NAMES: tuple[str, ...] = (
    "casewatch_detector_statistic",
    "casewatch_detector_alarm",
    "casewatch_detector_armed",
    "casewatch_detector_baseline_rate",
    "casewatch_detector_rate_since_change",
    "casewatch_detector_change_point_timestamp_seconds",
    "casewatch_detector_last_run_timestamp_seconds",
)


class DetectionGauges:
    def __init__(self, registry: CollectorRegistry, assistant_label: Callable[[str], str]) -> None:
        r = registry
        self._label = assistant_label
        labels = ["assistant", "signal"]
        self.statistic = Gauge(
            "casewatch_detector_statistic",
            "Largest CUSUM statistic of the detector's shifts as a fraction of its threshold "
            "(1.0 = threshold; 0 while not armed)",
            labels,
            registry=r,
        )
        self.alarm = Gauge(
            "casewatch_detector_alarm",
            "1 while the detector holds an alarm (from the first crossing until the rate "
            "returns to the baseline), else 0",
            labels,
            registry=r,
        )
        self.armed = Gauge(
            "casewatch_detector_armed",
            "1 when the detector has a baseline (enough reference turns or a pinned rate)",
            labels,
            registry=r,
        )
        self.baseline_rate = Gauge(
            "casewatch_detector_baseline_rate",
            "In-control severe rate p0 the detector tests against (NaN: not armed)",
            labels,
            registry=r,
        )
        self.rate_since = Gauge(
            "casewatch_detector_rate_since_change",
            "Observed severe rate since the estimated change point (only while in alarm)",
            labels,
            registry=r,
        )
        self.change_point = Gauge(
            "casewatch_detector_change_point_timestamp_seconds",
            "Unix time of the estimated change point (only while in alarm)",
            labels,
            registry=r,
        )
        self.last_run = Gauge(
            "casewatch_detector_last_run_timestamp_seconds",
            "Unix time the detection job last completed on this replica",
            registry=r,
        )
        self._series: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def record(
        self,
        assistant: str,
        signal: str,
        *,
        armed: bool,
        statistic: float,
        alarm: bool,
        baseline_rate: float | None,
        rate_since: float | None,
        change_point: float | None,
    ) -> None:
        label = self._label(assistant)
        with self._lock:
            self._series.add((label, signal))
        self.armed.labels(label, signal).set(1 if armed else 0)
        self.statistic.labels(label, signal).set(statistic if armed else 0.0)
        self.alarm.labels(label, signal).set(1 if alarm and armed else 0)
        self.baseline_rate.labels(label, signal).set(
            float("nan") if baseline_rate is None else baseline_rate
        )
        # Only while in alarm: a stale change point must not outlive the regression.
        for gauge, value in ((self.rate_since, rate_since), (self.change_point, change_point)):
            if alarm and value is not None:
                gauge.labels(label, signal).set(value)
            else:
                with contextlib.suppress(KeyError):
                    gauge.remove(label, signal)

    def record_run(self, finished_at: float) -> None:
        self.last_run.set(finished_at)
