"""One detector as it is stored: the one serializer of a ``detector_states`` row.

The detection job reads and writes these rows, and ``casewatch detect`` prints them; both go
through ``DetectorState.from_row`` and ``to_row``, so the JSON ``state`` column (shifts,
calibration, the CUSUMs) is parsed in one place. A state stored for another grid of shifts
than the configured one starts afresh (its CUSUMs and calibration are for other shifts).
A cell-conditional detector (the cascade: ``monitor.stats.cell_cusum``) stores its cells'
in-control rates and judged mix with its calibration (``cells``, ``mix``); ``from_row`` with
``cells`` True or False starts afresh a state stored for the other kind (the sampling strategy
changed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from monitor.stats.baseline_policy import Baseline, BaselineSource
from monitor.stats.cell_cusum import CellCalibration
from monitor.stats.cusum_calibration import Calibration
from monitor.stats.detection import Alarm, Detector
from monitor.stats.detection_signals import Signal

_SOURCES: tuple[BaselineSource, ...] = ("pinned", "reference", "none")


def from_unix(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, tz=UTC)


@dataclass
class DetectorState:
    """One (assistant, signal): baseline, the rate its thresholds assume, the detector."""

    assistant: str
    signal: Signal
    armed: bool
    baseline_rate: float | None
    baseline_source: BaselineSource
    reference_turns: int
    turn_rate: float | None  # judged turns per second the thresholds are calibrated for
    calibration: Calibration | None  # a CellCalibration for a cell-conditional detector
    detector: Detector
    observations: int
    calibrated_at: datetime | None
    alarm_at: datetime | None
    updated_at: datetime | None = None

    @classmethod
    def new(cls, assistant: str, signal: Signal, shifts: Sequence[float]) -> DetectorState:
        return cls(
            assistant, signal, False, None, "none", 0, None, None, Detector(tuple(shifts)), 0,
            None, None,
        )  # fmt: skip

    @classmethod
    def from_row(
        cls,
        row: Mapping[str, Any],
        shifts: Sequence[float] | None = None,
        *,
        cells: bool | None = None,
    ) -> DetectorState:
        """A stored row; ``shifts`` the configured grid (None: the stored one, for reading);
        ``cells`` whether the detector is cell-conditional (None: as stored, for reading)."""
        state = dict(row["state"] or {})
        stored = tuple(float(c) for c in state.get("shifts") or ())
        grid = stored if shifts is None else tuple(shifts)
        cal = state.get("calibration")
        kind = bool(cal and cal.get("cells") is not None)
        same = stored == grid and (cells is None or cells == kind)
        cal = cal if same else None
        calibration: Calibration | None = None
        if cal and len(cal["thresholds"]) == len(grid):
            p0 = float(cal["p0"])
            rates = tuple(float(r) for r in cal["rates"])
            thresholds = tuple(float(h) for h in cal["thresholds"])
            if kind:
                calibration = CellCalibration(
                    p0,
                    rates,
                    thresholds,
                    {str(c): float(r) for c, r in cal["cells"].items()},
                    {str(c): float(m) for c, m in (cal.get("mix") or {}).items()},
                )
            else:
                calibration = Calibration(p0, rates, thresholds)
        detector = Detector.from_dict(grid, state.get("detector") if same else None)
        source: BaselineSource = next((s for s in _SOURCES if s == row["baseline_source"]), "none")
        return cls(
            assistant=str(row["assistant"]),
            signal=Signal.from_name(str(row["signal"])),
            armed=bool(row["armed"]) and calibration is not None,
            baseline_rate=row["baseline_rate"],
            baseline_source=source,
            reference_turns=int(row["reference_turns"]),
            turn_rate=row["turn_rate"],
            calibration=calibration,
            detector=detector,
            observations=int(row["observations"]),
            calibrated_at=row["calibrated_at"] if calibration is not None else None,
            alarm_at=row["alarm_at"],
            updated_at=row.get("updated_at"),
        )

    @property
    def key(self) -> tuple[str, Signal]:
        return self.assistant, self.signal

    @property
    def latched(self) -> Alarm | None:
        return self.detector.latched

    @property
    def statistic(self) -> float:
        if self.calibration is None:
            return 0.0
        return self.detector.statistic(self.calibration)

    @property
    def change_point(self) -> datetime | None:
        latched = self.detector.latched
        return None if latched is None else from_unix(latched.change_point)

    @property
    def regression_start(self) -> datetime | None:
        """While in alarm, where its regression began: the estimated change point, else the
        alarm's time (None: no alarm). The failure modes since it name the regression."""
        if self.detector.latched is None:
            return None
        return self.change_point or self.alarm_at

    @property
    def frozen(self) -> bool:
        """In alarm: baseline and thresholds stay as they were (the regression must not
        become its own baseline, nor move the thresholds its recovery is judged by)."""
        return self.detector.latched is not None and self.calibration is not None

    def apply(self, baseline: Baseline) -> None:
        """Take a new baseline decision (not while frozen); disarming drops the thresholds."""
        if self.frozen:
            return
        self.baseline_rate, self.baseline_source = baseline.rate, baseline.source
        if not baseline.armed:
            self.armed, self.calibration = False, None

    def to_row(self, now: datetime) -> dict[str, Any]:
        cal = self.calibration
        latched = self.detector.latched
        return {
            "assistant": self.assistant,
            "signal": self.signal.name,
            "armed": self.armed,
            "baseline_rate": self.baseline_rate,
            "baseline_source": self.baseline_source,
            "reference_turns": self.reference_turns,
            "turn_rate": self.turn_rate,
            "statistic": self.statistic,
            "alarm": latched is not None,
            "alarm_at": self.alarm_at if latched is not None else None,
            "change_point": self.change_point,
            "rate_since": None if latched is None else latched.rate_since,
            "observations": self.observations,
            "calibrated_at": self.calibrated_at,
            "state": {
                "shifts": list(self.detector.shifts),
                "calibration": None if cal is None else _calibration_dict(cal),
                "detector": self.detector.to_dict(),
            },
            "updated_at": now,
        }


def _calibration_dict(cal: Calibration) -> dict[str, Any]:
    out: dict[str, Any] = {
        "p0": cal.p0,
        "rates": list(cal.rates),
        "thresholds": list(cal.thresholds),
    }
    if isinstance(cal, CellCalibration):
        out["cells"], out["mix"] = dict(cal.cells), dict(cal.mix)
    return out
