"""The offline heuristic judge: deterministic rules over identifiers, terms and sentences.

It is the embedded default when no judge endpoint is configured, so it must be honest about
what it is: every justification starts with ``heuristic:`` and names the evidence behind the
score, and every Judgment says ``kind="heuristic"``. It reads only what an LLM judge may read
(case, history, query, contexts, answer) and lands the flaws the Case-Aware paper cares most
about in the bands of appendix B:

- identifier_integrity: a near-miss of an evidence identifier of the same kind (E4012 for
  E4021, 4.12.3 for 4.12.0, a misspelled configuration key, two swapped URL path segments, a
  resource name or port with swapped digits, a changed flag or path) is severe;
- hallucination: the share of answer sentences the contexts and case do not support, and any
  step resting on an identifier found in no evidence (one invented step is moderate, two
  severe); prescribing what the evidence forbids is severe;
- retrieval_correctness / context_sufficiency: how far the contexts cover the key terms and
  identifiers of the query and case subject;
- resolution_alignment: repeating a step the user says was already done, failed, or cannot
  or may not be done, and prescribing what the evidence forbids ("never", "must not", "is not
  supported"), are severe (``monitor.judging.heuristic.constraints``);
- answer_helpfulness / answer_type_fit / case_issue_identification: actionable steps, the
  kind of answer the query asks for, and whether the answer addresses the case.

It does not see meaning: paraphrased support, wrong reasoning with right words and sequencing
rules written only in prose are beyond it. That is what the LLM judges are for.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from monitor.judging.heuristic.constraints import Workflow, workflow
from monitor.judging.heuristic.evidence import (
    TurnEvidence,
    analyse,
    claims,
    coverage,
    outermost,
)
from monitor.judging.heuristic.identifiers import IdKind
from monitor.schema.turn import (
    MAX_JUSTIFICATION_CHARS,
    Band,
    JudgeRole,
    JudgeScores,
    Judgment,
    MetricScore,
    TurnEvent,
)
from monitor.scoring.turn import band, lower_edge

__all__ = ["ALGORITHM_VERSION", "PROMPT_HASH", "HeuristicJudge", "score_turn"]

ALGORITHM_VERSION = "heuristic-v2"
PROMPT_HASH = hashlib.sha256(ALGORITHM_VERSION.encode()).hexdigest()

_log = structlog.get_logger(__name__)


# Below this a metric is at best moderate.
_MINOR_EDGE = lower_edge(Band.MINOR)
# A context covering this share of the key terms counts as relevant to the query.
_RELEVANT = 0.25
_FULL = 0.45
_REPEAT_SCORE = 0.2
_FORBIDDEN_SCORE = 0.15
_NOTHING_TO_FOLLOW_SCORE = 0.25  # helpfulness of an answer whose steps are all ruled out
_MIN_CLAIMS = 3
_LIST_LIMIT = 3


def _j(text: str) -> str:
    text = f"heuristic: {text}"
    if len(text) <= MAX_JUSTIFICATION_CHARS:
        return text
    return text[: MAX_JUSTIFICATION_CHARS - 3].rstrip() + "..."


def _interp(x: float, points: tuple[tuple[float, float], ...]) -> float:
    """Piecewise-linear map through (x, y) points sorted by x; clamped at both ends."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]


def _names(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_LIST_LIMIT])
    return shown + (f" (+{len(items) - _LIST_LIMIT} more)" if len(items) > _LIST_LIMIT else "")


def _quote(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return f'"{text[:limit]}{"..." if len(text) > limit else ""}"'


# ---------------------------------------------------------------- evidence quality


@dataclass(frozen=True, slots=True)
class _Retrieval:
    correctness: MetricScore
    sufficiency: MetricScore
    relevant_terms: frozenset[str]  # key terms of the contexts that are about the case


def _retrieval(ev: TurnEvidence) -> _Retrieval:
    if not ev.contexts:
        none = MetricScore(score=0.05, justification=_j("no contexts were retrieved"))
        return _Retrieval(none, none, frozenset())
    rel = sorted(
        ((coverage(ev.needs, c.terms, c.keys), c.id) for c in ev.contexts),
        key=lambda item: (-item[0], item[1]),
    )
    # A chunk is rarely about more than half of what a case mentions: covering _FULL of the
    # key terms makes it fully on topic.
    best = min(1.0, rel[0][0] / _FULL)
    second = min(1.0, rel[1][0] / _FULL) if len(rel) > 1 else best
    raw = 0.6 * best + 0.4 * second
    relevant = [cid for r, cid in rel if r >= _RELEVANT]
    off = [cid for r, cid in rel if r < _RELEVANT]
    rc = _interp(raw, ((0.3, 0.1), (0.45, 0.3), (0.6, 0.62), (0.8, 0.86), (0.95, 0.97)))
    detail = f"best context {rel[0][1]} covers {rel[0][0]:.0%} of the query/case key terms"
    rc_text = f"{detail}; relevant: {_names(relevant) or 'none'}"
    rc_text += f"; off-topic: {_names(off) or 'none'}"
    terms: set[str] = set()
    keys: set[str] = set()
    for c in ev.contexts:
        terms |= c.terms
        keys |= c.keys
    union = coverage(ev.needs, frozenset(terms), frozenset(keys))
    missing = sorted(k for k in ev.needs if k not in terms and k not in keys)
    cs = _interp(union, ((0.15, 0.05), (0.25, 0.3), (0.4, 0.6), (0.5, 0.86), (0.8, 0.97)))
    cs_text = f"contexts together cover {union:.0%} of the key terms"
    if missing:
        cs_text += f"; missing: {_names(missing)}"
    actionable = any(c.actionable for c in ev.contexts if c.id in relevant)
    if ev.intent == "instruct" and not actionable and cs > 0.55:
        cs = 0.55
        cs_text += "; no relevant context gives steps or commands for this how-to query"
    on_topic = frozenset().union(*(c.terms for c in ev.contexts if c.id in relevant))
    return _Retrieval(
        MetricScore(score=round(rc, 3), justification=_j(rc_text)),
        MetricScore(score=round(cs, 3), justification=_j(cs_text)),
        on_topic,
    )


# ---------------------------------------------------------------- grounding


def _hallucination(ev: TurnEvidence) -> tuple[MetricScore, int]:
    c = claims(ev)
    judged, corrupt, soft = c.judged, c.corrupted, len(c.unmoored)
    sentences, hard = len(c.unsupported), c.invented
    if judged == 0:
        return MetricScore(
            score=0.9, justification=_j("the answer makes no case-specific claim to check")
        ), 0
    # Vocabulary overlap is weak evidence (paraphrase is not invention): on its own it can
    # take the score to minor, and to moderate only when most of a longer answer is unmoored.
    # A step resting on an identifier no evidence contains is strong evidence.
    score = 1.0 - 0.45 * soft / judged - 0.25 * corrupt / judged
    parts = [f"{judged - sentences - soft - corrupt} of {judged} answer sentences are supported"]
    if soft:
        quotes = [_quote(q, 60) for q in c.unmoored]
        parts.append(f"{soft} mostly use terms absent from the evidence: {_names(quotes)}")
        if soft * 4 >= judged * 3 and judged >= _MIN_CLAIMS:
            score = min(score, 0.5)
    if hard:
        score = min(score, 1.0 - 0.8 * sentences / judged, (0.55, 0.28, 0.12)[min(hard, 3) - 1])
        parts.insert(
            1,
            f"{sentences} rest on identifiers in no context/case/history ({hard} invented "
            "step(s) or fact(s)): "
            f"{_names(c.novel_ids)}",
        )
    if corrupt:
        score = min(score, 0.8)
        parts.append(f"{corrupt} carry a corrupted identifier")
    return MetricScore(score=round(max(0.0, score), 3), justification=_j("; ".join(parts))), hard


def _identifier_integrity(ev: TurnEvidence) -> MetricScore:
    near = ev.id_check.near_misses
    if near:
        units = outermost([m.found.raw for m in near])
        near = tuple(m for m in near if m.found.raw in units)
        score = 0.2 if len(near) == 1 else 0.1
        return MetricScore(score=score, justification=_j(_names([m.describe() for m in near])))
    case_norms = {c.norm for c in ev.case_codes}
    answer_codes = [i for i in ev.answer_ids if i.kind is IdKind.ERROR_CODE]
    novel_codes = [i for i in ev.id_check.novel if i.kind is IdKind.ERROR_CODE]
    if novel_codes and case_norms and not any(i.norm in case_norms for i in answer_codes):
        text = (
            f"answer cites {_names([i.raw for i in novel_codes])} but not the case's "
            f"{_names([c.raw for c in ev.case_codes])}"
        )
        return MetricScore(score=0.5, justification=_j(text))
    loose = [
        i
        for i in ev.id_check.novel
        if i.kind in (IdKind.ERROR_CODE, IdKind.VERSION, IdKind.ARTICLE)
    ]
    if loose:
        text = f"{_names([i.raw for i in loose])} appear in no evidence (no near-miss either)"
        return MetricScore(score=0.8, justification=_j(text))
    matched = ev.id_check.matched
    if not ev.answer_ids:
        return MetricScore(score=0.95, justification=_j("the answer carries no identifiers"))
    text = f"all {len(matched)} answer identifiers match the evidence"
    if matched:
        text += f", e.g. {_names([i.raw for i in matched])}"
    return MetricScore(score=1.0 if matched else 0.95, justification=_j(text))


# ---------------------------------------------------------------- the answer against the case


def _case_issue(ev: TurnEvidence, relevant_terms: frozenset[str], cs: float) -> MetricScore:
    """Does the answer stay on the case's issue (the Case-Aware paper's M7)?

    Focus is the share of the answer's key terms found in the conversation itself or in the
    contexts that are about it; an answer built from an unrelated article scores low even when
    that article is well grounded.
    """
    answer = ev.answer_terms
    on_case = ev.dialogue_terms | relevant_terms
    focus = len(answer & on_case) / len(answer) if answer else 0.0
    subject = ev.subject_terms
    subj_cov = len(subject & answer) / len(subject) if subject else 1.0
    desc = ev.description_terms
    desc_hits = len(desc & answer)
    desc_cov = min(1.0, desc_hits / min(len(desc), 8)) if desc else 1.0
    case_norms = {c.norm for c in ev.case_codes}
    answer_codes = [i for i in ev.answer_ids if i.kind is IdKind.ERROR_CODE]
    code_hit = any(i.norm in case_norms for i in answer_codes)
    corrupted = {(m.found.kind, m.found.norm) for m in ev.id_check.near_misses}
    raw = 0.55 * focus + 0.25 * subj_cov + 0.2 * desc_cov + (0.15 if code_hit else 0.0)
    score = _interp(raw, ((0.2, 0.1), (0.3, 0.3), (0.4, 0.62), (0.55, 0.87), (0.8, 0.97)))
    parts = [
        f"{focus:.0%} of the answer's key terms come from the case, history or on-topic "
        f"contexts; it covers {subj_cov:.0%} of the subject's key terms"
    ]
    if case_norms:
        codes = _names(sorted(c.raw for c in ev.case_codes))
        parts.append(f"{'names' if code_hit else 'does not name'} the case code {codes}")
        # A near-miss of the case code is an identifier-integrity failure, scored there; a
        # different code means the answer is about another issue.
        other = [i.raw for i in answer_codes if (i.kind, i.norm) not in corrupted]
        if not code_hit and other:
            score = min(score, 0.55)
            parts.append(f"cites {_names(other)} instead")
    if any(s.insufficient for s in ev.answer) and cs >= _MINOR_EDGE and score > 0.8:
        score = 0.8
        parts.append("restates the issue but does not diagnose it")
    return MetricScore(score=round(score, 3), justification=_j("; ".join(parts)))


def _resolution(
    ev: TurnEvidence, flow: Workflow, off_topic: bool, cs: float, hard: int, corrupted: bool
) -> MetricScore:
    repeats = [f"{f.step} (user: {_quote(f.source, 70)})" for f in flow.repeats]
    violations = [f"{f.step} (evidence: {_quote(f.source, 70)})" for f in flow.violations]
    insufficient = any(s.insufficient for s in ev.answer)
    if violations:
        score = _FORBIDDEN_SCORE
        text = f"prescribes what the evidence forbids: {_names(violations)}"
        if repeats:
            text += f"; repeats {len(repeats)} step(s) ruled out: {_names(repeats)}"
    elif repeats:
        # A step the user already did, saw fail or cannot do sends them round in a circle.
        score = _REPEAT_SCORE if len(repeats) == 1 else _REPEAT_SCORE / 2
        done = len(repeats) - flow.refused
        what = ", ".join(
            x
            for x in (
                f"{done} already tried" if done else "",
                f"{flow.refused} refused or impossible" if flow.refused else "",
            )
            if x
        )
        text = f"repeats {len(repeats)} step(s) the user ruled out ({what}): {_names(repeats)}"
    elif off_topic:
        score, text = 0.5, "the steps do not address the case's issue"
    elif insufficient:
        score, text = (
            (0.9, "asks for what is missing instead of guessing (contexts are thin)")
            if cs < _MINOR_EDGE
            else (0.72, "declines to proceed although the contexts give the next steps")
        )
    else:
        score = 0.92
        text = "no step contradicts what the history says was tried"
        if any(s.acknowledges for s in ev.answer):
            score, text = 0.95, text + "; acknowledges earlier attempts"
        if hard >= 2:  # two invented steps make a different plan, not a detail
            score, text = 0.5, text + f"; {hard} steps rest on unsupported identifiers"
        elif hard or corrupted:
            score, text = 0.75, text + "; a step may not work as written (unsupported/corrupted)"
    if not flow.past and not repeats:
        text += "; history records no tried steps"
    return MetricScore(score=score, justification=_j(text))


def _helpfulness_and_fit(
    ev: TurnEvidence, cs: float, off_topic: bool, hard: int, penalties: list[str]
) -> tuple[MetricScore, MetricScore]:
    actions = sum(1 for s in ev.answer if s.action)
    commands = sum(1 for i in ev.answer_ids if i.kind is IdKind.COMMAND)
    question = any(s.question for s in ev.answer)
    insufficient = any(s.insufficient for s in ev.answer)
    explains = any(s.explains and not s.question for s in ev.answer)
    thin = cs < _MINOR_EDGE
    form = f"{actions} actionable step(s), {commands} command(s)"
    form += ", a clarifying question" if question else ""
    form += ", an explanation" if explains else ""
    form += ", an 'insufficient information' reply" if insufficient else ""

    if insufficient:
        helpful = (0.8 if question else 0.7) if thin else (0.45 if question else 0.35)
        why = "fine: the contexts are thin" if thin else "weak: the contexts were sufficient"
    elif actions >= 2 or (actions >= 1 and commands >= 1):
        helpful, why = 0.93, "advances the case with concrete steps"
    elif ev.intent == "explain" and explains:
        helpful, why = 0.9, "explains what the user asked about"
    elif question:
        helpful = 0.88 if ev.intent == "clarify" else 0.72
        why = "asks for the detail needed to proceed"
    elif actions == 1:
        helpful, why = 0.8, "one concrete step"
    elif explains:
        helpful, why = 0.7, "explains but gives nothing to do"
    else:
        helpful, why = 0.4, "vague: no step, command, explanation or question"
    if off_topic:
        helpful, why = min(helpful, 0.25), "addresses a different issue than the case"
    elif penalties:
        # Following two invented steps costs the user more than one wrong detail does.
        helpful = min(helpful, 0.93) - (0.35 if hard >= 2 else 0.15)
        why += f", but {', '.join(penalties)}"

    fits: dict[str, Callable[[], float]] = {
        "instruct": lambda: 0.92 if actions else 0.72 if question else 0.55 if explains else 0.45,
        "explain": lambda: 0.92 if explains else 0.68 if actions else 0.72 if question else 0.5,
        "clarify": lambda: 0.92 if question else 0.7 if actions else 0.65 if explains else 0.5,
    }
    fit = fits[ev.intent]()
    if insufficient:
        fit = (0.88 if question else 0.8) if thin else 0.5
    if off_topic:
        fit = min(fit, 0.72)
    fit_text = f"query asks to {ev.intent}; answer gives {form}"
    return (
        MetricScore(score=round(max(0.0, helpful), 3), justification=_j(f"{form}: {why}")),
        MetricScore(score=fit, justification=_j(fit_text)),
    )


# ---------------------------------------------------------------- the judge


def score_turn(turn: TurnEvent) -> JudgeScores:
    """The eight heuristic scores of a turn (pure and deterministic)."""
    ev = analyse(turn)
    retrieval = _retrieval(ev)
    cs = retrieval.sufficiency.score
    hallucination, hard = _hallucination(ev)
    integrity = _identifier_integrity(ev)
    case_issue = _case_issue(ev, retrieval.relevant_terms, cs)
    off_topic = band(case_issue.score) is Band.SEVERE
    corrupted = bool(ev.id_check.near_misses)
    flow = workflow(turn, ev)
    if flow.violations:
        hallucination = MetricScore(
            score=min(hallucination.score, _FORBIDDEN_SCORE),
            justification=_j(
                f"prescribes what the evidence forbids ({_quote(flow.violations[0].source, 70)}); "
                + hallucination.justification.removeprefix("heuristic: ")
            ),
        )
    penalties = []
    if corrupted:
        penalties.append("a command or identifier is corrupted")
    if hard:
        penalties.append("a step is unsupported by the evidence")
    resolution = _resolution(ev, flow, off_topic, cs, hard, corrupted)
    if flow.repeats:
        penalties.append("it repeats a step the user ruled out")
    helpful, fit = _helpfulness_and_fit(ev, cs, off_topic, hard, penalties)
    # Nothing left to follow: every step is forbidden, or was already done or refused.
    ruled_out = len(flow.repeats) + len(flow.violations)
    asks = any(q.question for q in ev.answer)
    if flow.violations or (ruled_out and ruled_out >= flow.prescriptive and not asks):
        why = "its steps are forbidden by the evidence or ruled out by the user"
        helpful = MetricScore(
            score=min(helpful.score, _NOTHING_TO_FOLLOW_SCORE),
            justification=_j(f"{helpful.justification.removeprefix('heuristic: ')}; {why}"),
        )
    return JudgeScores(
        hallucination=hallucination,
        retrieval_correctness=retrieval.correctness,
        context_sufficiency=retrieval.sufficiency,
        answer_helpfulness=helpful,
        answer_type_fit=fit,
        identifier_integrity=integrity,
        case_issue_identification=case_issue,
        resolution_alignment=resolution,
    )


class HeuristicJudge:
    """Deterministic offline judge; no network, no randomness, no mutable state."""

    def __init__(self, name: str = "heuristic", role: JudgeRole = "single") -> None:
        self._name = name
        self._role: JudgeRole = role

    @property
    def name(self) -> str:
        return self._name

    def judge(self, turn: TurnEvent) -> Judgment:
        start = time.perf_counter()
        try:
            scores = score_turn(turn)
        except Exception as exc:  # the protocol promises a Judgment, never an exception
            _log.exception("heuristic judge failed", judge=self._name, error=type(exc).__name__)
            return self._judgment(
                status="judge_failed",
                failure_reason="internal",
                failure_detail=f"{type(exc).__name__}: {exc}"[:500],
                latency_seconds=time.perf_counter() - start,
            )
        return self._judgment(
            status="ok",
            scores=scores,
            raw_output=scores.model_dump_json(),
            latency_seconds=time.perf_counter() - start,
        )

    def _judgment(self, **fields: object) -> Judgment:
        return Judgment.model_validate(
            {
                "judge": self._name,
                "kind": "heuristic",
                "model": ALGORITHM_VERSION,
                "role": self._role,
                "prompt_version": ALGORITHM_VERSION,
                "prompt_hash": PROMPT_HASH,
                "attempts": 1,
                **fields,
            }
        )

    def close(self) -> None:
        """Nothing to release."""
