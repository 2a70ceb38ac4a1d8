"""Whether the judge moved in a window (pure): the judge canary's alarms and the judge
configuration hashes of the verdicts stored in it, for ``casewatch detect`` to print beside the
assistant detectors. Its own module so that the command stays free of scipy (the canary's
logic needs it; this does not)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class JudgeChange:
    """Whether the judge moved in a window: the canary's alarms and the configuration hashes
    of the verdicts stored in it (for ``casewatch detect`` beside the assistant detectors)."""

    since: datetime
    canary_runs: int
    canary_alarms: tuple[str, ...]  # judges whose canary alarmed in the window
    canary_failed: int
    config_hashes: tuple[str, ...]  # oldest first

    @property
    def config_changed(self) -> bool:
        return len(self.config_hashes) > 1

    @property
    def judge_moved(self) -> bool:
        return bool(self.canary_alarms) or self.config_changed

    def to_dict(self) -> dict[str, Any]:
        return {
            "since": self.since.isoformat(timespec="seconds"),
            "canary_runs": self.canary_runs,
            "canary_failed_runs": self.canary_failed,
            "canary_alarms": list(self.canary_alarms),
            "config_hashes": list(self.config_hashes),
            "config_changed": self.config_changed,
        }

    def sentence(self) -> str:
        if self.canary_runs == 0:
            canary = "no judge canary run"
        elif self.canary_alarms:
            canary = f"the judge canary alarmed for {', '.join(self.canary_alarms)}"
        else:
            canary = f"the judge canary stayed quiet ({self.canary_runs} runs)"
        config = (
            f"the judge configuration changed ({' -> '.join(self.config_hashes)})"
            if self.config_changed
            else "the judge configuration did not change"
        )
        verdict = (
            "suspect the judge before the assistant"
            if self.judge_moved
            else "the judge did not move"
        )
        return f"since {self.since:%Y-%m-%d %H:%M} UTC {canary}; {config}: {verdict}"


def judge_change(
    since: datetime, canary_rows: Sequence[Mapping[str, Any]], config_hashes: Sequence[str]
) -> JudgeChange:
    return JudgeChange(
        since,
        len(canary_rows),
        tuple(sorted({str(r["judge"]) for r in canary_rows if r["alarm"]})),
        sum(1 for r in canary_rows if r["status"] == "failed"),
        tuple(config_hashes),
    )
