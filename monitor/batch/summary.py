"""What one ``casewatch judge`` run did: counts, and per assistant the verdicts of the file."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from monitor.schema.turn import Band, Verdict


@dataclass
class AssistantTally:
    """This run's verdicts for one assistant (``name@version``)."""

    n: int = 0
    judge_failed: int = 0
    s_final_sum: float = 0.0
    bands: Counter[str] = field(default_factory=Counter)

    @property
    def scored(self) -> int:
        return self.n - self.judge_failed

    @property
    def mean_s_final(self) -> float | None:
        return self.s_final_sum / self.scored if self.scored else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "judge_failed": self.judge_failed,
            "mean_s_final": self.mean_s_final,
            "turn_bands": {b.value: self.bands.get(b.value, 0) for b in Band},
        }


@dataclass
class BatchSummary:
    """Counts of one run. ``read == judged + skipped_existing + duplicates + rejected``;
    ``judge_failed`` is the part of ``judged`` that no judge could score."""

    read: int = 0
    judged: int = 0
    judge_failed: int = 0
    skipped_existing: int = 0
    duplicates: int = 0
    rejected: int = 0
    elapsed_seconds: float = 0.0
    # Per assistant over every turn of the file with a verdict: judged now or by an earlier run
    # into the same --out (a resumed run's table covers the whole file).
    per_assistant: dict[str, AssistantTally] = field(default_factory=dict)
    interrupted: bool = False  # Ctrl-C: stopped early; what was written is kept

    @property
    def all_failed(self) -> bool:
        """Every turn this run judged ended judge_failed (the judge is down or misconfigured)."""
        return self.judged > 0 and self.judge_failed == self.judged

    @property
    def all_rejected(self) -> bool:
        """Every line read was rejected: the input holds nothing that could be judged."""
        return self.read > 0 and self.rejected == self.read

    @property
    def turns_per_second(self) -> float:
        return self.judged / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0

    def add(self, verdict: Verdict) -> None:
        """A verdict this run judged and wrote."""
        self.judged += 1
        if verdict.status != "ok" or verdict.s_final is None:
            self.judge_failed += 1
        self.tally(verdict)

    def tally(self, verdict: Verdict) -> None:
        """A verdict of the file, judged now or by an earlier run (each event once)."""
        a = verdict.assistant
        key = f"{a.name}@{a.version}" if a.version else a.name
        tally = self.per_assistant.setdefault(key, AssistantTally())
        tally.n += 1
        if verdict.status != "ok" or verdict.s_final is None:
            tally.judge_failed += 1
            return
        tally.s_final_sum += verdict.s_final
        if verdict.turn_band is not None:
            tally.bands[verdict.turn_band.value] += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "judged": self.judged,
            "judge_failed": self.judge_failed,
            "skipped_existing": self.skipped_existing,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "interrupted": self.interrupted,
            "elapsed_seconds": round(self.elapsed_seconds, 3),
            "turns_per_second": round(self.turns_per_second, 2),
            "per_assistant": {k: v.to_dict() for k, v in sorted(self.per_assistant.items())},
        }
