"""The sequential detectors' run, shared by the jobs that feed them something other than judged
turns: the case detection job (case verdicts) and the outcome detection job (what users said).

A job gives a ``Source``: how to read its cursor, the observations not observed yet, the
reference and live counts per assistant and signal, and how to save the detectors' state with
the marks in one transaction. ``SignalDetection`` does the rest exactly as the turn detection job
(``monitor.jobs.detection``) does: baselines from the reference window (or pinned under
``detection.baselines``), thresholds calibrated to the deployment's false-alarm budget at the
live rate each detector is fed, the Bernoulli CUSUMs fed, alarms latched, the state saved fenced
on the job's lease, and the ``casewatch_detector_*{assistant, signal}`` gauges exported.

Each job's CUSUMs count in the false-alarm budget of their own grid (the union bound over its
armed CUSUMs); docs/detection.md says what that makes of the deployment's budget.

The turn detection job keeps its own run (cell-conditional detectors, left-out turns, failure
modes since a change) but shares the steps that are the same with this one: new detectors
(``add_detectors``), the reference window due (``reference_due``), the live rate
(``live_window``, ``watched``, ``live_rate``), the save's fence (``lease_fence``), the alarm's
latch and logs (``note_alarm``) and the gauges (``export_states``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Protocol

import structlog

from monitor.config.detection import DetectionConfig
from monitor.jobs.recorders import DetectionRecorder
from monitor.runtime.clock import Clock, SystemClock
from monitor.stats import baseline_policy as policy
from monitor.stats.cusum_calibration import Calibration, calibrate
from monitor.stats.detection_signals import Signal
from monitor.stats.detector_state import DetectorState
from monitor.storage import detection_queries, detector_saves
from monitor.storage.detector_saves import Cursor, LiveCounts
from monitor.storage.leases import Fence
from monitor.storage.store import Store

log = structlog.get_logger(__name__)

Key = tuple[str, Signal]


@dataclass(frozen=True)
class Observation:
    """One thing read: ``values`` maps each signal it is an observation of to its 0/1 (empty:
    read and marked, observed by no detector, e.g. a failed verdict)."""

    id: Hashable
    assistant: str
    at: datetime  # its time on the detectors' clock (the change point is estimated on it)
    values: Mapping[str, bool]


@dataclass(frozen=True)
class Counts:
    """One signal of one assistant in the reference window: observations, and how many were 1."""

    n: int
    x: int


class Source(Protocol):
    def read_cursor(self) -> Cursor: ...

    def read_new(self, limit: int) -> list[Observation]: ...

    def reference_counts(
        self, start: datetime, end: datetime, assistants: set[str] | None
    ) -> dict[str, dict[str, Counts]]: ...

    def live_counts(
        self, since: datetime, recent_since: datetime
    ) -> dict[str, dict[str, LiveCounts]]: ...

    def save(
        self,
        states: Iterable[Mapping[str, object]],
        cursor: Cursor,
        observed: Sequence[Hashable],
        now: datetime,
        *,
        history: bool,
        fence: Fence | None,
    ) -> Cursor: ...


# What the turn detection job (``monitor.jobs.detection``) and ``SignalDetection`` do alike.


def add_detectors(
    rows: dict[Key, DetectorState],
    assistant: str,
    signals: Iterable[Signal],
    shifts: tuple[float, ...],
    config: DetectionConfig,
) -> None:
    """The detectors of an assistant seen for the first time; pinned ones armed at once."""
    pinned = config.baselines.get(assistant, {})
    for signal in signals:
        if (assistant, signal) in rows:
            continue
        row = DetectorState.new(assistant, signal, shifts)
        if (rate := pinned.get(signal.name)) is not None:
            row.apply(policy.choose_baseline(rate, 0, 0, config.min_reference_turns))
        rows[(assistant, signal)] = row


def reference_due(
    rows: dict[Key, DetectorState],
    refreshed_at: datetime | None,
    now: datetime,
    config: DetectionConfig,
) -> tuple[datetime, datetime, set[str] | None] | None:
    """The reference window to read now and for which assistants (None: all, the periodic
    refresh); None when no reference is due."""
    unarmed = {r.assistant for r in rows.values() if r.baseline_rate is None and not r.frozen}
    due = policy.reference_refresh_due(
        refreshed_at, now, config.baseline_refresh_seconds, any_unarmed=bool(unarmed)
    )
    if due == "none":
        return None
    end = now - timedelta(seconds=config.reference_gap_seconds)
    start = end - timedelta(seconds=config.reference_window_seconds)
    return start, end, None if due == "all" else unarmed


def live_window(now: datetime) -> tuple[datetime, datetime]:
    """Since when the live rate is measured, and since when its burst."""
    return (
        now - timedelta(seconds=policy.RATE_WINDOW_S),
        now - timedelta(seconds=policy.BURST_WINDOW_S),
    )


def watched(
    rows: dict[Key, DetectorState], shifts: tuple[float, ...]
) -> tuple[list[DetectorState], int]:
    """The detectors with a baseline (or frozen), and the CUSUMs the false-alarm budget is
    split over."""
    rows_watched = [r for r in rows.values() if r.baseline_rate is not None or r.frozen]
    return rows_watched, max(1, len(rows_watched)) * len(shifts)


def live_rate(row: DetectorState, live: LiveCounts | None, now: datetime) -> float:
    """The rate a detector's thresholds are calibrated at, from its live counts."""
    measured = (
        0.0 if live is None else policy.measured_rate(live.turns, live.first, live.recent, now)
    )
    return policy.calibration_rate(row.turn_rate, measured)


def uniform_calibration(
    baseline_rate: float,
    shifts: tuple[float, ...],
    config: DetectionConfig,
    rate: float,
    cusums: int,
) -> Calibration:
    """A detector's thresholds for the false-alarm budget split over ``cusums`` CUSUMs, fed at
    ``rate`` per second."""
    return calibrate(
        baseline_rate,
        shifts,
        false_alarm_days=config.false_alarm_days,
        rate_per_s=rate,
        detectors=cusums,
    )


def arm(row: DetectorState, calibration: Calibration, rate: float, now: datetime) -> None:
    """Arm a detector with ``calibration`` at ``rate`` (``calibrated_at`` moves only when the
    thresholds do)."""
    if calibration != row.calibration:
        row.calibration, row.calibrated_at = calibration, now
    row.turn_rate, row.armed = rate, True


def lease_fence(clock: Clock, job: str, owner: str | None) -> Fence | None:
    """The save's fence: the job's lease as it is now, not at the run's start (None: unfenced)."""
    if owner is None:
        return None
    return Fence(job, owner, datetime.fromtimestamp(clock.time(), tz=UTC))


def note_alarm(
    row: DetectorState,
    was: bool,
    raised: int,
    now: datetime,
    what: str,
    logger: structlog.typing.FilteringBoundLogger,
) -> None:
    """After a detector was fed: latch (``raised``) or clear its alarm, logged as ``what``
    regression detected / over."""
    if raised:
        row.alarm_at = now
        latched = row.detector.latched
        logger.warning(
            f"{what} regression detected",
            assistant=row.assistant,
            signal=row.signal.name,
            baseline_rate=row.baseline_rate,
            shift=None if latched is None else latched.shift,
            rate_since=None if latched is None else latched.rate_since,
            change_point=row.change_point,
        )
    elif was and row.detector.latched is None:
        row.alarm_at = None
        logger.info(f"{what} regression over", assistant=row.assistant, signal=row.signal.name)


def export_states(
    gauges: DetectionRecorder | None, rows: Iterable[DetectorState], now: datetime
) -> None:
    """The ``casewatch_detector_*`` gauges of ``rows``, and the run's time."""
    if gauges is None:
        return
    for r in rows:
        latched = r.detector.latched
        gauges.record(
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
    # count, so its alarms page from the replica holding this job's lease.
    gauges.record_run(now.timestamp())


class Queries(Protocol):
    """A store query module's cursor and marks (``storage.case_detection_queries``, ...)."""

    READ_LIMIT: int
    MARKS: detector_saves.Marks

    def read_cursor(self, store: Store) -> Cursor: ...


class StoreSource(ABC):
    """A ``Source`` over a store query module, which gives the cursor and the save as they are."""

    queries: ClassVar[Queries]

    def __init__(self, store: Store) -> None:
        self._store = store

    @abstractmethod
    def read_new(self, limit: int) -> list[Observation]: ...

    @abstractmethod
    def reference_counts(
        self, start: datetime, end: datetime, assistants: set[str] | None
    ) -> dict[str, dict[str, Counts]]: ...

    @abstractmethod
    def live_counts(
        self, since: datetime, recent_since: datetime
    ) -> dict[str, dict[str, LiveCounts]]: ...

    def read_cursor(self) -> Cursor:
        return self.queries.read_cursor(self._store)

    def save(
        self,
        states: Iterable[Mapping[str, Any]],
        cursor: Cursor,
        observed: Sequence[Hashable],
        now: datetime,
        *,
        history: bool,
        fence: Fence | None,
    ) -> Cursor:
        return detector_saves.save(
            self._store, self.queries.MARKS, states, cursor, observed, now,
            history=history, fence=fence,
        )  # fmt: skip


class SignalDetection:
    """The detectors of ``signals`` per assistant, fed from ``source``."""

    def __init__(
        self,
        job_name: str,
        what: str,
        config: DetectionConfig,
        signals: Sequence[Signal],
        source: Source,
        store: Store,
        gauges: DetectionRecorder | None,
        *,
        clock: Clock | None = None,
        lease_owner: str | None = None,
        read_limit: int,
    ) -> None:
        """``what``: the words its logs use (``case quality``, ``outcome``)."""
        self.name = job_name
        self._what = what
        self._cfg = config
        self._signals = list(signals)
        self._source = source
        self._store = store
        self._shifts = tuple(config.shifts)
        self._gauges = gauges
        self._clock = clock or SystemClock()
        self._lease_owner = lease_owner
        self._read_limit = read_limit
        self._refreshed_at: datetime | None = None
        self.interval_seconds = config.interval_seconds
        self.alarms_raised = 0  # this process's count, for logs and tests

    def close(self) -> None:
        pass  # holds nothing beyond the store, which the daemon closes

    def run(self) -> None:
        self.run_once()

    def run_once(self) -> list[DetectorState]:
        now = datetime.fromtimestamp(self._clock.time(), tz=UTC)
        cursor = self._source.read_cursor()
        rows = self._load()
        history = cursor.position is None  # what was stored before the first run: history
        read = [] if history else self._source.read_new(self._read_limit)
        if len(read) == self._read_limit:
            log.info(f"{self.name} backlog: the rest is read by the next runs", read=len(read))
        for name in {o.assistant for o in read} | set(self._cfg.baselines):
            self._add(rows, name)
        self._refresh_baselines(rows, now)
        self._calibrate(rows, now)
        self._observe(rows, read, now)
        fence = lease_fence(self._clock, self.name, self._lease_owner)
        states = (r.to_row(now) for r in rows.values())
        observed = [o.id for o in read]
        self._source.save(states, cursor, observed, now, history=history, fence=fence)
        self._export(rows.values(), now)
        return sorted(rows.values(), key=lambda r: (r.assistant, r.signal.name))

    def _load(self) -> dict[Key, DetectorState]:
        names = {s.name for s in self._signals}
        rows = {}
        for raw in detection_queries.read_states(self._store):
            if str(raw["signal"]) not in names:
                continue  # another job's detector
            state = DetectorState.from_row(raw, self._shifts)
            rows[state.key] = state
        return rows

    def _add(self, rows: dict[Key, DetectorState], assistant: str) -> None:
        add_detectors(rows, assistant, self._signals, self._shifts, self._cfg)

    def _refresh_baselines(self, rows: dict[Key, DetectorState], now: datetime) -> None:
        cfg = self._cfg
        window = reference_due(rows, self._refreshed_at, now, cfg)
        if window is None:
            return
        start, end, names = window
        counts = self._source.reference_counts(start, end, names)
        if names is None:
            self._refreshed_at = now
            for name in counts:
                self._add(rows, name)
        for row in rows.values():
            if names is not None and row.assistant not in names:
                continue
            ref = counts.get(row.assistant, {}).get(row.signal.name, Counts(0, 0))
            row.reference_turns = ref.n
            pinned = cfg.baselines.get(row.assistant, {}).get(row.signal.name)
            row.apply(policy.choose_baseline(pinned, ref.n, ref.x, cfg.min_reference_turns))

    def _calibrate(self, rows: dict[Key, DetectorState], now: datetime) -> None:
        """Thresholds for every armed detector at the live rate it is fed."""
        cfg = self._cfg
        live = self._source.live_counts(*live_window(now))
        rows_watched, cusums = watched(rows, self._shifts)
        for row in rows_watched:
            if row.frozen or row.baseline_rate is None:
                continue
            rate = live_rate(row, live.get(row.assistant, {}).get(row.signal.name), now)
            calibration = uniform_calibration(row.baseline_rate, self._shifts, cfg, rate, cusums)
            arm(row, calibration, rate, now)

    def _observe(
        self, rows: dict[Key, DetectorState], read: list[Observation], now: datetime
    ) -> None:
        per: dict[Key, tuple[list[bool], list[float]]] = defaultdict(lambda: ([], []))
        for o in read:
            t = o.at.timestamp()
            for signal in self._signals:
                x = o.values.get(signal.name)
                if x is None:
                    continue
                xs, ts = per[(o.assistant, signal)]
                xs.append(bool(x))
                ts.append(t)
        for key, (xs, ts) in per.items():
            row = rows[key]
            row.observations += len(xs)
            cal = row.calibration
            if not row.armed or not isinstance(cal, Calibration):
                continue  # not armed (these signals are never cell-conditional)
            was = row.detector.latched is not None
            raised = row.detector.update(xs, ts, cal)
            self.alarms_raised += raised
            note_alarm(row, was, raised, now, self._what, log)

    def _export(self, rows: Iterable[DetectorState], now: datetime) -> None:
        export_states(self._gauges, rows, now)


class StoreSignalDetection(SignalDetection):
    """A job of ``SignalDetection`` over a ``StoreSource``: what it is, as class attributes."""

    JOB_NAME: ClassVar[str]
    WHAT: ClassVar[str]  # the words its logs use
    SOURCE: ClassVar[type[StoreSource]]

    @staticmethod
    def signals() -> Sequence[Signal]:
        raise NotImplementedError

    def __init__(
        self,
        config: DetectionConfig,
        store: Store,
        gauges: DetectionRecorder | None,
        *,
        clock: Clock | None = None,
        lease_owner: str | None = None,
        read_limit: int | None = None,
    ) -> None:
        """``read_limit``: at most that many read a run (default: the query module's)."""
        source = self.SOURCE(store)
        super().__init__(
            self.JOB_NAME,
            self.WHAT,
            config,
            self.signals(),
            source,
            store,
            gauges,
            clock=clock,
            lease_owner=lease_owner,
            read_limit=source.queries.READ_LIMIT if read_limit is None else read_limit,
        )
