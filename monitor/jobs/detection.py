"""The detection job: every verdict since the cursor into each assistant's sequential detectors.

Signals per assistant (``monitor.stats.detection_signals``): the judged turn severe, and
each critical metric severe. ``judge_failed`` verdicts are read (the cursor passes them) but are
not observations.

Each run, before feeding the new verdicts:

- baselines (``monitor.stats.baseline_policy``): a pinned rate arms its detector at once;
  otherwise the reference window's rate (the ``reference_window_seconds`` ending
  ``reference_gap_seconds`` ago, so a regression under way is not yet in its own baseline), read
  for every assistant every ``baseline_refresh_seconds`` and, for assistants with a detector not
  armed yet, on every run (so a detector arms within one interval of having its reference);
- thresholds (``monitor.stats.cusum_calibration``): calibrated for the deployment's
  false-alarm budget (union bound over every armed CUSUM) at the judged-turn rate each
  assistant's detectors are fed now, measured from the store (every replica's verdicts), so the
  budget holds in days whatever the traffic. Thresholds are cached: a run that changes nothing
  costs a lookup per CUSUM.

A detector holding an alarm keeps its baseline and thresholds frozen until the alarm clears (the
regression must not become its own baseline). After an alarm the CUSUMs restart from zero and
the detector stays in alarm until a reverse CUSUM shows the rate back at the baseline (see
``Detector``), so one regression pages once.

While a detector holds an alarm, the largest failure modes among its assistant's failed turns
since the change point (else since the alarm) are exported beside it, read from the
failure-modes job's newest grouping (``storage/failure_modes.modes_since``): each mode's number
as a gauge's value, never a label, so the regression page can name them. They are read again
only when that grouping or the change point changes, and removed when the alarm clears.

Each verdict is observed exactly once: a run reads the verdicts not marked observed yet,
whenever their writers committed, and marks them in the transaction that saves the detectors'
state (``monitor.storage.detection_queries``: no position on ``stored_at`` or the ids that a
late commit could fall behind). State, marks and cursor are in the store (``detector_states``,
``verdicts.observed_at``, ``detector_cursor``), written in one transaction per run, through one
serializer (``monitor.stats.detector_state``): a restart or a lease moving to another replica
continues the statistics. Under the scheduler the save is fenced on the job's lease, and any
save is refused when another run saved since this one read: a replica whose lease lapsed
mid-run (and was taken), or a second run beside it, saves nothing and counts nothing twice.

Under the cascade (``sampling.strategy: cascade``, ``cascade=True``) the judged turns
over-represent the cells the cheap look finds risky, so the detectors are cell-conditional
(``monitor.stats.cell_cusum``): every drawn turn is fed with its stratum (its stored cheap
cell, apart when drawn with probability 1) and weight 1/pi, each stratum's in-control rate read
from the reference window (each turn weighted by 1/pi), the population's baseline p0 and its
shifts as for the Bernoulli detectors, and the thresholds solved for the same false-alarm
budget. Left out, counted by reason and logged once per reason: a turn with no stored cell
(``no_cell``: judged before the cascade, or stored without its draw) and a turn whose stratum
the reference window holds none of (``cell_without_baseline``). Under the uniform strategy a
turn the cascade drew (a store that ran the cascade before) is left out (``cascade_draw``).
A state stored for the other strategy starts afresh.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

import structlog

from monitor.config.detection import DetectionConfig
from monitor.jobs.recorders import DetectionRecorder
from monitor.jobs.signal_detection import (
    add_detectors,
    arm,
    export_states,
    lease_fence,
    live_rate,
    live_window,
    note_alarm,
    reference_due,
    uniform_calibration,
    watched,
)
from monitor.metrics.exporter import SINCE_CHANGE_RANKS
from monitor.runtime.clock import Clock, SystemClock
from monitor.stats import baseline_policy as policy
from monitor.stats.cell_cusum import CellCalibration, calibrate_cells, cell_baseline, stratum
from monitor.stats.cusum_calibration import Calibration
from monitor.stats.detection_signals import Signal, signals
from monitor.stats.detector_state import DetectorState
from monitor.storage import detection_queries as q
from monitor.storage.failure_modes import mode_number, modes_since, newest_grouping
from monitor.storage.store import Store

log = structlog.get_logger(__name__)

JOB_NAME = "detection"
Key = tuple[str, Signal]

# Why a judged turn was not observed (casewatch_detector_left_out_total{reason}).
NO_CELL = "no_cell"
CELL_WITHOUT_BASELINE = "cell_without_baseline"
CASCADE_DRAW = "cascade_draw"
_LEFT_OUT_WHY = {
    NO_CELL: "judged turns with no cheap-look cell stored are left out of the cell-conditional "
    "detectors (judged before sampling.strategy: cascade, or stored without their draw)",
    CELL_WITHOUT_BASELINE: "judged turns of a cheap-look cell the reference window holds no "
    "turn of are left out of the cell-conditional detectors until it does",
    CASCADE_DRAW: "judged turns the cascade drew are left out of the uniform strategy's "
    "detectors (drawn by their cell, not uniformly)",
}


class DetectionJob:
    name = JOB_NAME

    def __init__(
        self,
        config: DetectionConfig,
        critical_metrics: list[str],
        store: Store,
        gauges: DetectionRecorder | None,
        *,
        clock: Clock | None = None,
        lease_owner: str | None = None,
        read_limit: int = q.READ_LIMIT,
        cascade: bool = False,
        failure_modes: bool = False,
    ) -> None:
        """``lease_owner``: the scheduler's owner id; saves are then refused once another
        replica holds the job's lease (None: unfenced, for a run outside the scheduler).
        ``cascade``: ``sampling.strategy: cascade``, the detectors are cell-conditional (see
        the module doc).
        ``failure_modes``: the failure-modes job runs, so an alarm's gauges name the largest
        modes since its change point."""
        self._cascade = cascade
        # Per assistant, the reference window's counts per stratum (cell-conditional only).
        self._cells: dict[str, dict[str, q.ReferenceCounts]] = {}
        self._warned: set[str] = set()
        self.left_out = 0  # judged turns not observed, this process
        self._cfg = config
        self._metrics = list(critical_metrics)
        self._signals = signals(self._metrics)
        self._shifts = tuple(config.shifts)
        self._store = store
        self._gauges = gauges
        self._clock = clock or SystemClock()
        self._lease_owner = lease_owner
        self._read_limit = read_limit  # verdicts one run feeds at most (a backlog: several)
        self._refreshed_at: datetime | None = None
        self.interval_seconds = config.interval_seconds
        self.alarms_raised = 0  # this process's count, for logs and tests
        self._failure_modes = failure_modes
        # Per alarmed detector, the (since, grouping run) its modes were last read for.
        self._modes_read: dict[Key, tuple[datetime, int]] = {}
        if "overlap_seconds" in config.model_fields_set:
            log.warning(
                "detection.overlap_seconds is no longer used: the detectors mark each verdict "
                "they observe, so a late commit needs no re-read window; remove the setting",
                overlap_seconds=config.overlap_seconds,
            )

    def close(self) -> None:
        pass  # holds nothing beyond the store, which the daemon closes

    def run(self) -> None:
        self.run_once()

    def run_once(self) -> list[DetectorState]:
        now = datetime.fromtimestamp(self._clock.time(), tz=UTC)
        cfg = self._cfg
        cursor = q.read_cursor(self._store)
        rows = self._load()
        # The first run starts the detectors: what was stored before it is history (the
        # baselines'), marked observed by its save without being read (the whole table).
        history = cursor.position is None
        read = [] if history else q.read_new(self._store, self._metrics, self._read_limit)
        if len(read) == self._read_limit:
            log.info("detection backlog: the rest is read by the next runs", read=len(read))
        for name in {o.assistant for o in read} | set(cfg.baselines):
            self._add(rows, name, now)
        self._refresh_baselines(rows, now)
        self._calibrate(rows, now)
        self._observe(rows, read, now)
        fence = lease_fence(self._clock, JOB_NAME, self._lease_owner)
        states = (r.to_row(now) for r in rows.values())
        observed = [o.id for o in read]
        q.save(self._store, states, cursor, observed, now, history=history, fence=fence)
        self._export(rows.values(), now)
        self._export_modes_since(rows.values())
        return sorted(rows.values(), key=lambda r: (r.assistant, r.signal.name))

    def _load(self) -> dict[Key, DetectorState]:
        watched = set(self._signals)
        rows = {}
        for raw in q.read_states(self._store):
            state = DetectorState.from_row(raw, self._shifts, cells=self._cascade)
            if state.signal in watched:  # a metric no longer critical is no longer watched
                rows[state.key] = state
        return rows

    def _add(self, rows: dict[Key, DetectorState], assistant: str, now: datetime) -> None:
        """The detectors of an assistant seen for the first time; pinned ones armed at once."""
        add_detectors(rows, assistant, self._signals, self._shifts, self._cfg)

    def _refresh_baselines(self, rows: dict[Key, DetectorState], now: datetime) -> None:
        cfg = self._cfg
        window = reference_due(rows, self._refreshed_at, now, cfg)
        if window is None:
            return
        start, end, names = window
        counts = q.reference_counts(
            self._store, start, end, self._metrics, names, by_cell=self._cascade
        )
        if names is None:
            self._refreshed_at = now
            for name in counts:
                self._add(rows, name, now)
        for row in rows.values():
            if names is not None and row.assistant not in names:
                continue
            ref = counts.get(row.assistant)
            n = 0 if ref is None else ref.turns
            row.reference_turns = n
            severe = 0
            if ref is not None:
                severe = _severe(ref, row.signal)
            pinned = cfg.baselines.get(row.assistant, {}).get(row.signal.name)
            baseline = policy.choose_baseline(pinned, n, severe, cfg.min_reference_turns)
            if self._cascade:
                # The cells' in-control rates come from the reference window whatever the
                # population's baseline: without min_reference_turns drawn turns with a cell
                # there, a cell-conditional detector is not armed (a pinned rate included).
                cells = {} if ref is None else ref.cells
                self._cells[row.assistant] = cells
                if sum(c.judged for c in cells.values()) < cfg.min_reference_turns:
                    baseline = policy.NOT_ARMED
            row.apply(baseline)

    def _calibrate(self, rows: dict[Key, DetectorState], now: datetime) -> None:
        """Thresholds for every armed detector at its assistant's live judged-turn rate."""
        cfg = self._cfg
        live = q.live_counts(self._store, *live_window(now))
        rows_watched, cusums = watched(rows, self._shifts)
        for row in rows_watched:
            if row.frozen or row.baseline_rate is None:
                continue
            rate = live_rate(row, live.get(row.assistant), now)
            calibration: Calibration | None
            if self._cascade:
                calibration = self._cell_calibration(row, rate, cusums)
                if calibration is None:  # no reference read in this process yet: as it was
                    continue
            else:
                calibration = uniform_calibration(
                    row.baseline_rate, self._shifts, cfg, rate, cusums
                )
            arm(row, calibration, rate, now)

    def _cell_calibration(
        self, row: DetectorState, rate: float, cusums: int
    ) -> CellCalibration | None:
        """The cell-conditional thresholds of an armed row: each stratum's in-control rate
        read high (``cell_baseline``) from its reference turns, the judged mix as drawn."""
        cells = self._cells.get(row.assistant)
        if not cells or row.baseline_rate is None:
            return None
        rates = {c: cell_baseline(_severe(ref, row.signal), ref.turns) for c, ref in cells.items()}
        mix = {c: float(ref.judged) for c, ref in cells.items()}
        return calibrate_cells(
            row.baseline_rate,
            rates,
            mix,
            self._shifts,
            false_alarm_days=self._cfg.false_alarm_days,
            rate_per_s=rate,
            detectors=cusums,
        )

    def _observe(
        self, rows: dict[Key, DetectorState], read: list[q.Observation], now: datetime
    ) -> None:
        per: dict[Key, _Batch] = defaultdict(_Batch)
        left_out: dict[tuple[str, str], int] = defaultdict(int)
        for o in read:
            if not o.ok:
                continue
            cell, weight = "", 1.0
            if self._cascade:
                if o.cheap_cell is None or o.inclusion_probability is None:
                    left_out[(o.assistant, NO_CELL)] += 1
                    continue
                cell = stratum(o.cheap_cell, o.inclusion_probability)
                weight = 1.0 / o.inclusion_probability
            elif o.inclusion_probability is not None:
                left_out[(o.assistant, CASCADE_DRAW)] += 1
                continue
            t = o.event_timestamp.timestamp()
            for signal in self._signals:
                per[(o.assistant, signal)].add(
                    signal.severe(o.turn_severe, o.severe_metrics), t, cell, weight
                )
        for key, batch in per.items():
            row = rows[key]
            cal = row.calibration
            if isinstance(cal, CellCalibration) and row.armed:
                unknown = batch.keep(cal.knows)
                if unknown and row.signal.metric is None:  # counted once, by the turn's signal
                    left_out[(row.assistant, CELL_WITHOUT_BASELINE)] += unknown
            xs, ts = batch.severe, batch.times
            row.observations += len(xs)
            if not row.armed or cal is None or not xs:
                continue
            was = row.detector.latched is not None
            if isinstance(cal, CellCalibration):
                steps = cal.steps(batch.cells, xs)
                raised = row.detector.update_steps(xs, ts, steps, cal.thresholds, batch.weights)
            else:
                raised = row.detector.update(xs, ts, cal)
            self.alarms_raised += raised
            note_alarm(row, was, raised, now, "quality", log)

        for (assistant, reason), n in sorted(left_out.items()):
            if reason not in self._warned:
                self._warned.add(reason)
                log.warning(_LEFT_OUT_WHY[reason], reason=reason, left_out=n)
            self.left_out += n
            if self._gauges is not None:
                self._gauges.record_left_out(assistant, n, reason)

    def _export(self, rows: Iterable[DetectorState], now: datetime) -> None:
        export_states(self._gauges, rows, now)

    def _export_modes_since(self, rows: Iterable[DetectorState]) -> None:
        """The largest failure modes since each alarmed detector's change point (else its
        alarm), read when the newest grouping or the point moved; removed once it clears."""
        g = self._gauges
        if g is None or not self._failure_modes:
            return
        for r in rows:
            since = r.regression_start
            if since is None:
                if self._modes_read.pop(r.key, None) is not None:
                    g.forget_modes_since(r.assistant, r.signal.name)
                continue
            grouping = newest_grouping(self._store, r.assistant)
            if grouping is None:
                continue  # no grouping yet: nothing to name
            if self._modes_read.get(r.key) == (since, grouping[0]):
                continue
            found = modes_since(self._store, r.assistant, since, limit=SINCE_CHANGE_RANKS)
            self._modes_read[r.key] = (since, grouping[0])
            ranked = [(mode_number(m.mode_id), found.share(n)) for m, n in found.modes]
            g.record_modes_since(r.assistant, r.signal.name, ranked)
            log.info(
                "failure modes since the change point",
                assistant=r.assistant,
                signal=r.signal.name,
                since=since,
                failed=found.failed,
                modes=[f"{m.mode_id} {n}" for m, n in found.modes],
            )


def _severe(ref: q.ReferenceCounts, signal: Signal) -> int:
    """The reference's severe count for a signal."""
    metric = signal.metric
    return ref.severe_turns if metric is None else ref.severe_metrics.get(metric, 0)


class _Batch:
    """One detector's observations of a run, in order: 0/1, time, stratum, weight."""

    def __init__(self) -> None:
        self.severe: list[bool] = []
        self.times: list[float] = []
        self.cells: list[str] = []
        self.weights: list[float] = []

    def add(self, severe: bool, at: float, cell: str, weight: float) -> None:
        self.severe.append(severe)
        self.times.append(at)
        self.cells.append(cell)
        self.weights.append(weight)

    def keep(self, known: Callable[[str], bool]) -> int:
        """Keep the observations whose stratum is ``known``; how many were dropped."""
        kept = [i for i, c in enumerate(self.cells) if known(c)]
        dropped = len(self.cells) - len(kept)
        if dropped:
            self.severe = [self.severe[i] for i in kept]
            self.times = [self.times[i] for i in kept]
            self.cells = [self.cells[i] for i in kept]
            self.weights = [self.weights[i] for i in kept]
        return dropped
