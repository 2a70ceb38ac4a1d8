"""The detection job: every verdict since the cursor into each assistant's sequential detectors.

Signals per assistant: ``turn_severe`` (the judged turn's band is severe) and one
``<metric>_severe`` per critical metric. ``judge_failed`` verdicts are read (the cursor passes
them) but are not observations. Every ``baseline_refresh_seconds`` the baselines are recomputed
from the reference window (the ``reference_window_seconds`` ending ``reference_gap_seconds``
ago, so a regression under way is not yet in its own baseline) or taken from the pinned rates,
and every detector's thresholds are calibrated for the deployment's false-alarm budget
(``monitor.reporting.detection.calibrate``: union bound over every armed CUSUM). A detector with
fewer than ``min_reference_turns`` reference turns is not armed: exported as armed = 0, never as
"no regression". A detector holding an alarm keeps its baseline frozen until the alarm clears
(the regression must not become its own baseline).

After an alarm: the CUSUMs restart from zero and the detector stays in alarm until a reverse
CUSUM shows the rate back at the baseline (see ``Detector``), so one regression pages once.
State and cursor are in the store (``detector_states``, ``detector_cursor``), written in one
transaction per run: a restart or a lease moving to another replica continues the statistics.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from monitor.clock import Clock, SystemClock
from monitor.jobs.recorders import DetectionRecorder
from monitor.reporting.cusum_calibration import Calibration, calibrate
from monitor.reporting.detection import Detector
from monitor.settings import DetectionConfig
from monitor.storage import detection_queries as q
from monitor.storage.store import Store

log = structlog.get_logger(__name__)

TURN_SIGNAL = "turn_severe"
MIN_RATE_SPAN_S = 3600.0  # a reference rate is measured over at least an hour


def signals(critical_metrics: list[str]) -> list[str]:
    return [TURN_SIGNAL, *(f"{m}_severe" for m in critical_metrics)]


def _ts(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _dt(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, tz=UTC)


@dataclass
class DetectorRow:
    """One (assistant, signal) as stored: baseline, calibration and the detector itself."""

    assistant: str
    signal: str
    armed: bool
    baseline_rate: float | None
    baseline_source: str
    reference_turns: int
    turn_rate: float | None
    calibration: Calibration | None
    detector: Detector
    observations: int
    calibrated_at: datetime | None
    alarm_at: datetime | None

    @classmethod
    def new(cls, assistant: str, signal: str, shifts: tuple[float, ...]) -> DetectorRow:
        return cls(
            assistant, signal, False, None, "none", 0, None, None, Detector(shifts), 0, None, None
        )

    @classmethod
    def load(cls, row: dict[str, Any], shifts: tuple[float, ...]) -> DetectorRow:
        state = dict(row["state"])
        cal = state.get("calibration")
        calibration = None
        if cal and len(cal["thresholds"]) == len(shifts) and state.get("shifts") == list(shifts):
            calibration = Calibration(
                float(cal["p0"]), tuple(cal["rates"]), tuple(cal["thresholds"])
            )
        detector = Detector.from_dict(
            shifts, state.get("detector") if state.get("shifts") == list(shifts) else None
        )
        return cls(
            row["assistant"],
            row["signal"],
            bool(row["armed"]) and calibration is not None,
            row["baseline_rate"],
            row["baseline_source"],
            int(row["reference_turns"]),
            row["turn_rate"],
            calibration,
            detector,
            int(row["observations"]),
            row["calibrated_at"] if calibration is not None else None,
            row["alarm_at"],
        )

    @property
    def statistic(self) -> float:
        if self.calibration is None:
            return 0.0
        return self.detector.statistic(self.calibration)

    def to_row(self, now: datetime) -> dict[str, Any]:
        cal = self.calibration
        latched = self.detector.latched
        return {
            "assistant": self.assistant,
            "signal": self.signal,
            "armed": self.armed,
            "baseline_rate": self.baseline_rate,
            "baseline_source": self.baseline_source,
            "reference_turns": self.reference_turns,
            "turn_rate": self.turn_rate,
            "statistic": self.statistic,
            "alarm": latched is not None,
            "alarm_at": self.alarm_at if latched is not None else None,
            "change_point": None if latched is None else _dt(latched.change_point),
            "rate_since": None if latched is None else latched.rate_since,
            "observations": self.observations,
            "calibrated_at": self.calibrated_at,
            "state": {
                "shifts": list(self.detector.shifts),
                "calibration": None
                if cal is None
                else {"p0": cal.p0, "rates": list(cal.rates), "thresholds": list(cal.thresholds)},
                "detector": self.detector.to_dict(),
            },
            "updated_at": now,
        }


class DetectionJob:
    name = "detection"

    def __init__(
        self,
        config: DetectionConfig,
        critical_metrics: list[str],
        store: Store,
        gauges: DetectionRecorder | None,
        *,
        clock: Clock | None = None,
    ) -> None:
        self._cfg = config
        self._metrics = list(critical_metrics)
        self._signals = signals(self._metrics)
        self._shifts = tuple(config.shifts)
        self._store = store
        self._gauges = gauges
        self._clock = clock or SystemClock()
        self.interval_seconds = config.interval_seconds
        self.alarms_raised = 0  # this process's count, for logs and tests

    def close(self) -> None:
        pass  # holds nothing beyond the store, which the daemon closes

    def run(self) -> None:
        self.run_once()

    def run_once(self) -> list[DetectorRow]:
        now = datetime.fromtimestamp(self._clock.time(), tz=UTC)
        cfg = self._cfg
        cursor = q.read_cursor(self._store)
        rows = {
            (r["assistant"], r["signal"]): DetectorRow.load(r, self._shifts)
            for r in q.read_states(self._store)
        }
        read = q.read_new(self._store, cursor, cfg.overlap_seconds, self._metrics, start=now)
        # The first run starts the cursor: what was stored before it is history (the
        # baseline's), read only to be marked seen.
        observed = read if cursor.position is not None else []
        for o in read:
            for signal in self._signals:
                rows.setdefault(
                    (o.assistant, signal), DetectorRow.new(o.assistant, signal, self._shifts)
                )
        if self._refresh_due(rows, now):
            self._recalibrate(rows, now)
        self._observe(rows, observed, now)
        new_cursor = q.advance(cursor, read, cfg.overlap_seconds)
        if new_cursor.position is None:
            new_cursor.position = now  # nothing yet: start here, never replay history later
        q.save(self._store, (r.to_row(now) for r in rows.values()), new_cursor, now)
        self._export(rows.values(), now)
        return sorted(rows.values(), key=lambda r: (r.assistant, r.signal))

    def _refresh_due(self, rows: dict[tuple[str, str], DetectorRow], now: datetime) -> bool:
        every = timedelta(seconds=self._cfg.baseline_refresh_seconds)
        stale = (r.calibrated_at is None or now - r.calibrated_at >= every for r in rows.values())
        return not rows or any(stale)

    def _recalibrate(self, rows: dict[tuple[str, str], DetectorRow], now: datetime) -> None:
        cfg = self._cfg
        end = now - timedelta(seconds=cfg.reference_gap_seconds)
        start = end - timedelta(seconds=cfg.reference_window_seconds)
        counts = q.reference_counts(self._store, start, end, self._metrics)
        for name in counts:
            for signal in self._signals:
                rows.setdefault((name, signal), DetectorRow.new(name, signal, self._shifts))
        plans: list[tuple[DetectorRow, float, float]] = []
        for row in rows.values():
            ref = counts.get(row.assistant)
            n = 0 if ref is None else ref.turns
            row.reference_turns = n
            row.calibrated_at = now
            pinned = cfg.baselines.get(row.assistant, {}).get(row.signal)
            if ref is None or n < cfg.min_reference_turns or ref.first is None:
                if row.detector.latched is None:
                    row.armed, row.calibration = False, None
                    row.baseline_rate = pinned
                    row.baseline_source = "pinned" if pinned is not None else "none"
                continue
            span = max((end - ref.first).total_seconds(), MIN_RATE_SPAN_S)
            row.turn_rate = n / span
            if row.detector.latched is not None and row.calibration is not None:
                continue  # frozen while in alarm
            if pinned is not None:
                p0, row.baseline_source = pinned, "pinned"
            else:
                x = (
                    ref.severe_turns
                    if row.signal == TURN_SIGNAL
                    else ref.severe_metrics.get(row.signal.removesuffix("_severe"), 0)
                )
                # Half a severe turn added: a clean reference still has a positive rate.
                p0, row.baseline_source = (x + 0.5) / (n + 1), "reference"
            plans.append((row, p0, row.turn_rate))
        detectors = max(1, len(plans) + sum(1 for r in rows.values() if r.detector.latched)) * len(
            self._shifts
        )
        for row, p0, rate in plans:
            row.calibration = calibrate(
                p0,
                self._shifts,
                false_alarm_days=cfg.false_alarm_days,
                rate_per_s=rate,
                detectors=detectors,
            )
            row.baseline_rate, row.armed = p0, True

    def _observe(
        self, rows: dict[tuple[str, str], DetectorRow], read: list[q.Observation], now: datetime
    ) -> None:
        per: dict[tuple[str, str], tuple[list[bool], list[float]]] = defaultdict(lambda: ([], []))
        for o in read:
            if not o.ok:
                continue
            t = o.event_timestamp.timestamp()
            for signal in self._signals:
                xs, ts = per[(o.assistant, signal)]
                if signal == TURN_SIGNAL:
                    xs.append(o.turn_severe)
                else:
                    xs.append(signal.removesuffix("_severe") in o.severe_metrics)
                ts.append(t)
        for key, (xs, ts) in per.items():
            row = rows[key]
            row.observations += len(xs)
            if not row.armed or row.calibration is None:
                continue
            was = row.detector.latched is not None
            raised = row.detector.update(xs, ts, row.calibration)
            if raised:
                row.alarm_at = now
                self.alarms_raised += raised
                latched = row.detector.latched
                log.warning(
                    "quality regression detected",
                    assistant=row.assistant,
                    signal=row.signal,
                    baseline_rate=row.baseline_rate,
                    rate_since=None if latched is None else latched.rate_since,
                    change_point=None if latched is None else _dt(latched.change_point),
                )
            elif was and row.detector.latched is None:
                row.alarm_at = None
                log.info("quality regression over", assistant=row.assistant, signal=row.signal)

    def _export(self, rows: Any, now: datetime) -> None:
        g = self._gauges
        if g is None:
            return
        for r in rows:
            latched = r.detector.latched
            g.record(
                r.assistant,
                r.signal,
                armed=r.armed,
                statistic=r.statistic,
                alarm=latched is not None,
                baseline_rate=r.baseline_rate if r.armed else None,
                rate_since=None if latched is None else latched.rate_since,
                change_point=None if latched is None else latched.change_point,
            )
        g.record_run(now.timestamp())
