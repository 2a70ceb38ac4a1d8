"""The ``drift`` section: the recent window of turns against a reference window, per
assistant, and the names of the label signals it tests. Read by ``jobs/drift.py`` and the
drift statistics (``stats/drift.py``, ``stats/drift_stats.py``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from pydantic import Field, model_validator

from monitor.config.section import Section


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class DriftReferencePeriod(Section):
    """A pinned reference window (e.g. the week after a known-good release)."""

    start: datetime
    end: datetime

    @model_validator(mode="after")
    def _check(self) -> DriftReferencePeriod:
        start, end = _as_utc(self.start), _as_utc(self.end)
        if end <= start:
            raise ValueError(f"end ({end.isoformat()}) must be after start ({start.isoformat()})")
        return self

    def bounds(self) -> tuple[datetime, datetime]:
        """(start, end) as aware UTC datetimes (naive values are taken as UTC)."""
        return _as_utc(self.start), _as_utc(self.end)


class DriftMinEffect(Section):
    """Smallest effect size that counts as drift, per kind of statistic (a significant but
    smaller shift is reported, not flagged: a huge window makes any shift significant)."""

    ks_d: float = Field(default=0.1, ge=0, le=1, description="Two-sample KS D (continuous).")
    cliffs_delta: float = Field(
        default=0.147, ge=0, le=1, description="|Cliff's delta| (counts; 0.147 = 'small')."
    )
    cramers_v: float = Field(default=0.1, ge=0, le=1, description="Cramér's V (shares).")
    cohens_h: float = Field(default=0.1, ge=0, le=3.15, description="|Cohen's h| (rates).")
    psi: float = Field(default=0.1, ge=0, description="Population stability index.")


_LABEL_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")


def drift_label_signal(key: str) -> str:
    """The bounded signal name of a configured label key (``input_label_<key>``)."""
    return "input_label_" + re.sub(r"[^a-z0-9_]", "_", key.lower())


class DriftConfig(Section):
    """Recent window vs reference window, per assistant, read from the SQL store."""

    enabled: bool = True
    interval_seconds: float = Field(default=300.0, gt=0, description="How often the job runs.")
    recent_window_seconds: float = Field(default=3600.0, gt=0)
    reference_window_seconds: float = Field(
        default=7 * 86400.0, gt=0, description="Length of the window just before the recent one."
    )
    reference_period: DriftReferencePeriod | None = Field(
        default=None, description="Pinned reference [start, end) instead of the sliding one."
    )
    min_turns: int = Field(default=30, ge=2, description="Per window and signal, else skipped.")
    alpha: float = Field(default=0.01, gt=0, lt=1, description="Benjamini-Hochberg FDR level.")
    min_effect: DriftMinEffect = Field(default_factory=DriftMinEffect)
    labels: list[str] = Field(
        default_factory=list, max_length=10, description="Event label keys to test."
    )
    max_categories: int = Field(
        default=20, ge=2, le=200, description="Rarer categories are pooled as __other__."
    )

    @model_validator(mode="after")
    def _check(self) -> DriftConfig:
        signals: dict[str, str] = {}
        for key in self.labels:
            if not _LABEL_KEY.match(key):
                raise ValueError(
                    f"labels: {key!r} is not a label key (1-40 letters, digits, '_', '.', '-')"
                )
            signal = drift_label_signal(key)
            if signal in signals:
                raise ValueError(
                    f"labels: {signals[signal]!r} and {key!r} map to the same signal {signal}"
                )
            signals[signal] = key
        return self
