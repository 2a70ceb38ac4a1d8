"""What a sequential detector watches: one 0/1 signal per judged turn of an assistant.

``turn_severe`` (the judged turn's band is severe) and ``<metric>_severe`` for each critical
metric. The case detectors (monitor/jobs/case_detection.py) watch one 0/1 signal per case
verdict: ``case_severe`` (the case band is severe) and ``case_unresolved`` (the case judge
found it unresolved). The outcome detectors (monitor/jobs/outcome_detection.py) watch what the
users said, one 0/1 observation per outcome event of an assistant, sampled or not:
``negative_feedback`` (per feedback with a polarity: was it negative), ``handoff`` (per case that
ended, handed off or resolved: was it handed to a person) and ``reopen`` (per resolution or
reopening: was it a reopening). A signal is a typed value, not a string taken apart: its stored and
exported name is ``Signal.name``, and a stored name is read back with ``Signal.from_name``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

TURN_SEVERE = "turn_severe"
_SUFFIX = "_severe"
CASE_SEVERE = "case_severe"
CASE_UNRESOLVED = "case_unresolved"
CASE_SIGNALS: tuple[str, ...] = (CASE_SEVERE, CASE_UNRESOLVED)
NEGATIVE_FEEDBACK = "negative_feedback"
HANDOFF = "handoff"
REOPEN = "reopen"
OUTCOME_SIGNALS: tuple[str, ...] = (NEGATIVE_FEEDBACK, HANDOFF, REOPEN)


@dataclass(frozen=True, order=True)
class Signal:
    """``metric`` None: the turn's band; else that metric's band. ``case``: a case signal
    (one of ``CASE_SIGNALS``), observed per case verdict instead. ``outcome``: an outcome
    signal (one of ``OUTCOME_SIGNALS``), observed per outcome event."""

    metric: str | None = None
    case: str | None = None
    outcome: str | None = None

    @property
    def name(self) -> str:
        if self.outcome is not None:
            return self.outcome
        if self.case is not None:
            return self.case
        return TURN_SEVERE if self.metric is None else f"{self.metric}{_SUFFIX}"

    def __str__(self) -> str:
        return self.name

    @classmethod
    def from_name(cls, name: str) -> Signal:
        """The signal a stored or configured name stands for; ValueError for any other name."""
        if name == TURN_SEVERE:
            return cls(None)
        if name in CASE_SIGNALS:
            return cls(case=name)
        if name in OUTCOME_SIGNALS:
            return cls(outcome=name)
        metric = name[: -len(_SUFFIX)] if name.endswith(_SUFFIX) else ""
        if not metric:
            raise ValueError(
                f"{name!r} is not a detector signal (turn_severe, <metric>_severe, "
                f"{', '.join(CASE_SIGNALS + OUTCOME_SIGNALS)})"
            )
        return cls(metric)

    def severe(self, turn_severe: bool, severe_metrics: frozenset[str]) -> bool:
        """This signal's observation for a judged turn."""
        return turn_severe if self.metric is None else self.metric in severe_metrics


def signals(critical_metrics: Iterable[str]) -> list[Signal]:
    """The signals watched per assistant: the turn, then each critical metric."""
    return [Signal(None), *(Signal(m) for m in critical_metrics)]


def case_signals() -> list[Signal]:
    """The case signals watched per assistant."""
    return [Signal(case=name) for name in CASE_SIGNALS]


def outcome_signals() -> list[Signal]:
    """The outcome signals watched per assistant."""
    return [Signal(outcome=name) for name in OUTCOME_SIGNALS]
