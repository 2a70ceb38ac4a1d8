"""The case detection job: every case verdict since the last run into each assistant's
sequential detectors on case signals, the way the detection job feeds turns.

Signals per assistant (``monitor.stats.detection_signals.case_signals``): ``case_severe`` (the
case band is severe) and ``case_unresolved`` (the case judge found the case unresolved), one
0/1 observation per ok case verdict (a resumed case judged again is observed again;
``judge_failed`` verdicts are marked read but not observed). Baselines, thresholds and alarms
follow the detection job exactly, with the detection section's settings (shifts, false-alarm
budget, reference window and gap, ``min_reference_turns`` counting case verdicts, pinned
``baselines`` under the case signal names): the reference rate is read from the case verdicts
judged in the reference window, and the thresholds are calibrated at the live rate of case
verdicts. The CUSUMs of this job count in the false-alarm budget of their own grid (the union
bound over its armed CUSUMs): together with the turn detectors the deployment's budget is at
most doubled, and the docs say so.

The state is stored beside the turn detectors' (``detector_states``, the case signals' rows)
with the marks in ``case_verdict_observations`` (``monitor.storage.case_detection_queries``),
in one transaction per run, fenced on the job's lease: a verdict is observed once through
restarts, a lease that moves, or a second run beside it. The gauges are the detection
machinery's (``casewatch_detector_*{assistant, signal}``), so the quality-regression alert and
``casewatch detect`` cover case signals as they are.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import structlog

from monitor.config.detection import DetectionConfig
from monitor.jobs.recorders import DetectionRecorder
from monitor.runtime.clock import Clock, SystemClock
from monitor.stats import baseline_policy as policy
from monitor.stats.cusum_calibration import calibrate
from monitor.stats.detection_signals import Signal, case_signals
from monitor.stats.detector_state import DetectorState
from monitor.storage import case_detection_queries as q
from monitor.storage import detection_queries
from monitor.storage.leases import Fence
from monitor.storage.store import Store

log = structlog.get_logger(__name__)

JOB_NAME = "case_detection"
Key = tuple[str, Signal]


class CaseDetectionJob:
    name = JOB_NAME

    def __init__(
        self,
        config: DetectionConfig,
        store: Store,
        gauges: DetectionRecorder | None,
        *,
        clock: Clock | None = None,
        lease_owner: str | None = None,
        read_limit: int = q.READ_LIMIT,
    ) -> None:
        self._cfg = config
        self._signals = case_signals()
        self._shifts = tuple(config.shifts)
        self._store = store
        self._gauges = gauges
        self._clock = clock or SystemClock()
        self._lease_owner = lease_owner
        self._read_limit = read_limit
        self._refreshed_at: datetime | None = None
        self.interval_seconds = config.interval_seconds
        self.alarms_raised = 0

    def close(self) -> None:
        pass  # holds nothing beyond the store, which the daemon closes

    def run(self) -> None:
        self.run_once()

    def run_once(self) -> list[DetectorState]:
        now = datetime.fromtimestamp(self._clock.time(), tz=UTC)
        cursor = q.read_cursor(self._store)
        rows = self._load()
        history = cursor.position is None  # what was judged before the first run: history
        read = [] if history else q.read_new(self._store, self._read_limit)
        if len(read) == self._read_limit:
            log.info("case detection backlog: the rest is read by the next runs", read=len(read))
        for name in {o.assistant for o in read} | set(self._cfg.baselines):
            self._add(rows, name)
        self._refresh_baselines(rows, now)
        self._calibrate(rows, now)
        self._observe(rows, read, now)
        fence = None
        if self._lease_owner is not None:
            at = datetime.fromtimestamp(self._clock.time(), tz=UTC)
            fence = Fence(JOB_NAME, self._lease_owner, at)
        states = (r.to_row(now) for r in rows.values())
        q.save(self._store, states, cursor, [o.id for o in read], now, history=history,
               fence=fence)  # fmt: skip
        self._export(rows.values(), now)
        return sorted(rows.values(), key=lambda r: (r.assistant, r.signal.name))

    def _load(self) -> dict[Key, DetectorState]:
        watched = set(self._signals)
        rows = {}
        for raw in detection_queries.read_states(self._store):
            if str(raw["signal"]) not in {s.name for s in watched}:
                continue  # a turn detector: the detection job's
            state = DetectorState.from_row(raw, self._shifts)
            rows[state.key] = state
        return rows

    def _add(self, rows: dict[Key, DetectorState], assistant: str) -> None:
        pinned = self._cfg.baselines.get(assistant, {})
        for signal in self._signals:
            if (assistant, signal) in rows:
                continue
            row = DetectorState.new(assistant, signal, self._shifts)
            if (rate := pinned.get(signal.name)) is not None:
                row.apply(policy.choose_baseline(rate, 0, 0, self._cfg.min_reference_turns))
            rows[(assistant, signal)] = row

    def _refresh_baselines(self, rows: dict[Key, DetectorState], now: datetime) -> None:
        cfg = self._cfg
        unarmed = {r.assistant for r in rows.values() if r.baseline_rate is None and not r.frozen}
        due = policy.reference_refresh_due(
            self._refreshed_at, now, cfg.baseline_refresh_seconds, any_unarmed=bool(unarmed)
        )
        if due == "none":
            return
        end = now - timedelta(seconds=cfg.reference_gap_seconds)
        start = end - timedelta(seconds=cfg.reference_window_seconds)
        names = None if due == "all" else unarmed
        counts = q.reference_counts(self._store, start, end, names)
        if due == "all":
            self._refreshed_at = now
            for name in counts:
                self._add(rows, name)
        for row in rows.values():
            if names is not None and row.assistant not in names:
                continue
            ref = counts.get(row.assistant)
            n = 0 if ref is None else ref.cases
            severe = 0 if ref is None else ref.severe.get(row.signal.name, 0)
            row.reference_turns = n
            pinned = cfg.baselines.get(row.assistant, {}).get(row.signal.name)
            row.apply(policy.choose_baseline(pinned, n, severe, cfg.min_reference_turns))

    def _calibrate(self, rows: dict[Key, DetectorState], now: datetime) -> None:
        """Thresholds for every armed detector at its assistant's live case-verdict rate."""
        cfg = self._cfg
        live = q.live_counts(
            self._store,
            now - timedelta(seconds=policy.RATE_WINDOW_S),
            now - timedelta(seconds=policy.BURST_WINDOW_S),
        )
        watched = [r for r in rows.values() if r.baseline_rate is not None or r.frozen]
        cusums = max(1, len(watched)) * len(self._shifts)
        for row in watched:
            if row.frozen or row.baseline_rate is None:
                continue
            c = live.get(row.assistant)
            measured = 0.0 if c is None else policy.measured_rate(c.turns, c.first, c.recent, now)
            rate = policy.calibration_rate(row.turn_rate, measured)
            calibration = calibrate(
                row.baseline_rate,
                self._shifts,
                false_alarm_days=cfg.false_alarm_days,
                rate_per_s=rate,
                detectors=cusums,
            )
            if calibration != row.calibration:
                row.calibration, row.calibrated_at = calibration, now
            row.turn_rate, row.armed = rate, True

    def _observe(
        self, rows: dict[Key, DetectorState], read: list[q.CaseObservation], now: datetime
    ) -> None:
        per: dict[Key, tuple[list[bool], list[float]]] = defaultdict(lambda: ([], []))
        for o in read:
            if not o.ok:
                continue
            t = o.judged_at.timestamp()
            for signal in self._signals:
                xs, ts = per[(o.assistant, signal)]
                xs.append(bool(o.values[signal.name]))
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
                    "case quality regression detected",
                    assistant=row.assistant,
                    signal=row.signal.name,
                    baseline_rate=row.baseline_rate,
                    shift=None if latched is None else latched.shift,
                    rate_since=None if latched is None else latched.rate_since,
                    change_point=row.change_point,
                )
            elif was and row.detector.latched is None:
                row.alarm_at = None
                log.info(
                    "case quality regression over", assistant=row.assistant, signal=row.signal.name
                )

    def _export(self, rows: Iterable[DetectorState], now: datetime) -> None:
        g = self._gauges
        if g is None:
            return
        for r in rows:
            latched = r.detector.latched
            g.record(
                r.assistant,
                r.signal.name,
                armed=r.armed,
                statistic=r.statistic,
                alarm=latched is not None,
                baseline_rate=r.baseline_rate if r.armed else None,
                rate_since=None if latched is None else latched.rate_since,
                change_point=None if latched is None else latched.change_point,
            )
        # The alert reads the detectors' gauges only where they ran lately: this job's runs
        # count, so case alarms page from the replica holding this job's lease.
        g.record_run(now.timestamp())
