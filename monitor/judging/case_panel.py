"""The case judges of the live panel, run on one case: primaries, and the arbiter on dispute.

The case panel follows the turn panel's decision table (``monitor.judging.panel``), with the
case band and the outcome as what two judges can disagree on:

====================================  ===========================  ===========  ===============
primaries                             arbiter                      arbitrated   final
====================================  ===========================  ===========  ===============
one primary, answered                 -                            False        its scores
one primary, failed                   -                            False        judge_failed
both answered, agree                  not asked                    False        mean of two
both answered, disagree               answers                      True         median of 3
both answered, disagree               fails / none configured      True/False   mean of two
one failed (trigger primary_failed)   answers                      True         mean of two
one failed                            fails / none configured      True/False   judge_failed
both failed                           not asked                    False        judge_failed
====================================  ===========================  ===========  ===============

The outcome of several judges is the most common one, ties to the worse. A failed verdict
carries the judge's reason (one judge) or ``panel_insufficient``, and keeps every judgment.
Judges are called one after another: a case is judged by a scheduled job, not on the stream.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.config.judges import HEURISTIC, JudgeConfig
from monitor.judging.case_judge import CaseJudge, OpenAICaseJudge
from monitor.judging.case_prompt import CASE_PROMPT_VERSION
from monitor.judging.heuristic.case_judge import HEURISTIC_CASE_VERSION, HeuristicCaseJudge
from monitor.schema.case import Case, CaseJudgment
from monitor.schema.turn import JudgeRole
from monitor.scoring import case as case_scoring

PANEL_INSUFFICIENT = "panel_insufficient"
PRIMARY_FAILED = "primary_failed"
DISAGREEMENT = "case_band"


@dataclass(frozen=True)
class CaseResult:
    """What the panel concluded about one case."""

    status: str  # ok | judge_failed
    failure_reason: str | None
    scores: dict[str, float]
    outcome: str | None
    judgments: tuple[CaseJudgment, ...]
    arbitrated: bool
    trigger: str | None
    turns_cut: int  # the most turns any judge's prompt left out


@dataclass(frozen=True)
class NamedJudge:
    name: str
    config: JudgeConfig
    role: JudgeRole


def build_case_judge(judge: NamedJudge, *, max_prompt_chars: int) -> CaseJudge:
    if judge.config.kind == HEURISTIC:
        return HeuristicCaseJudge(judge.name, judge.role)
    return OpenAICaseJudge(judge.name, judge.config, judge.role, max_prompt_chars=max_prompt_chars)


def case_config_hash(judges: Sequence[NamedJudge], max_prompt_chars: int) -> str:
    """What produced a case verdict: the case prompt, each judge and its role, the rule."""
    doc = {
        "prompt": CASE_PROMPT_VERSION,
        "heuristic": HEURISTIC_CASE_VERSION,
        "judges": [[j.name, j.role, j.config.fingerprint()] for j in judges],
        "weights": case_scoring.CASE_WEIGHTS,
        "max_prompt_chars": max_prompt_chars,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


class CasePanel:
    """One or two primary case judges and an optional arbiter (the live panel's judges)."""

    def __init__(self, primaries: Sequence[CaseJudge], arbiter: CaseJudge | None) -> None:
        if not 1 <= len(primaries) <= 2:
            raise ValueError("a case panel has one or two primaries")
        if arbiter is not None and len(primaries) != 2:
            raise ValueError("an arbiter needs two primaries")
        self._primaries = list(primaries)
        self._arbiter = arbiter

    @property
    def max_calls(self) -> int:
        """Judges one case may call (what a case reserves of the hourly budget)."""
        return len(self._primaries) + (1 if self._arbiter is not None else 0)

    def close(self) -> None:
        for judge in [*self._primaries, *([self._arbiter] if self._arbiter else [])]:
            judge.close()

    def judge(self, case: Case) -> CaseResult:
        answers = [j.judge_case(case) for j in self._primaries]
        judgments = [a for a, _ in answers]
        cut = max(c for _, c in answers)
        ok = [j for j in judgments if j.ok]
        if len(judgments) == 1:
            return _result(judgments, ok, False, None, cut, judgments[0].failure_reason)
        trigger: str | None = None
        if len(ok) == 2:
            a, b = (_scores(j) for j in ok)
            if not case_scoring.bands_differ(a, _outcome(ok[0]), b, _outcome(ok[1])):
                return _result(judgments, ok, False, None, cut, None)
            trigger = DISAGREEMENT
        elif len(ok) == 1:
            trigger = PRIMARY_FAILED
        else:
            return _result(judgments, ok, False, None, cut, PANEL_INSUFFICIENT)
        if self._arbiter is None:
            return _result(judgments, ok, False, trigger, cut, PANEL_INSUFFICIENT)
        verdict, arbiter_cut = self._arbiter.judge_case(case)
        judgments.append(verdict)
        cut = max(cut, arbiter_cut)
        if verdict.ok:
            ok.append(verdict)
        return _result(judgments, ok, True, trigger, cut, PANEL_INSUFFICIENT)


def _scores(judgment: CaseJudgment) -> dict[str, float]:
    assert judgment.scores is not None  # noqa: S101 -- only ok judgments reach here
    return judgment.scores.score_map()


def _outcome(judgment: CaseJudgment) -> str:
    assert judgment.scores is not None  # noqa: S101 -- only ok judgments reach here
    return judgment.scores.resolution_outcome


def _result(
    judgments: list[CaseJudgment],
    ok: list[CaseJudgment],
    arbitrated: bool,
    trigger: str | None,
    cut: int,
    reason_if_short: str | None,
) -> CaseResult:
    """Scores from the ok judgments (one alone only when it is the panel's one primary)."""
    needed = 1 if len(judgments) == 1 else 2
    if len(ok) < needed:
        return CaseResult(
            "judge_failed",
            reason_if_short or "internal",
            {},
            None,
            tuple(judgments),
            arbitrated,
            trigger,
            cut,
        )
    scores = case_scoring.combine([_scores(j) for j in ok])
    outcome = case_scoring.outcome_of([_outcome(j) for j in ok])
    return CaseResult("ok", None, scores, outcome, tuple(judgments), arbitrated, trigger, cut)
