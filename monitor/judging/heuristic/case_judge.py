"""The offline case judge: a whole conversation scored by what its text says, no model.

For the demo, the tests and a first look without a model; what it reads, per case metric:

- resolution: a handoff phrase in the last answer (``handed_off``); a confirmation from the
  customer in the last query (``resolved``); a last answer that says it cannot help
  (``unresolved``); a customer reporting a failing step in every query of three or more
  (``partial``); else ``resolved`` with a minor gap (steps given, no confirmation seen);
- issue tracking: answers sharing neither a key term nor an identifier with the case fields
  (off the customer's issue);
- workflow alignment: a step (a command in backticks that changes something, or a sentence
  starting with an action verb; never a request for output) repeated from an earlier answer
  or from what the customer said they had run, unless the answer acknowledges it;
- consistency: an identifier in an answer that looks like a corruption of one the case, the
  customer, the evidence or an earlier answer used (``heuristic.identifiers.check``);
- customer effort: turns beyond the second, repeated questions, failures reported.

Scores sit inside the Case-Aware paper's bands (severe 0.00-0.30 ... none 0.86-1.00) by the
issue found, like the turn heuristic's. Thread-safe: no state.
"""

from __future__ import annotations

import re
import time

from monitor.judging.heuristic import identifiers
from monitor.judging.heuristic.lexicon import (
    ACK,
    ACTION_VERB_WORDS,
    GENERIC_WORDS,
    INSUFFICIENT,
    SENTENCE_BREAK,
    STOPWORDS,
    WORD,
)
from monitor.judging.heuristic.tokens import extract_tokens, normalise_token
from monitor.schema.case import Case, CaseJudgment, CaseScores, ResolutionOutcome
from monitor.schema.turn import JudgeRole, MetricScore

HEURISTIC_CASE_VERSION = "heuristic-case-v1"

_IGNORED = STOPWORDS | frozenset(GENERIC_WORDS.split())
_ACTIONS = frozenset(ACTION_VERB_WORDS.split())
_COMMAND = re.compile(r"`([^`\n]{3,})`")
_READ_ONLY_WORDS = (
    "status show list get describe ls cat tail head grep log logs usage paths info version"
    " history df du stat find query check verify inspect diff lsscsi"
)
_READ_ONLY = frozenset(_READ_ONLY_WORDS.split())
_ASKS_OUTPUT = re.compile(r"\b(?:share|send|paste|output of|could you|can you)\b|\?\s*$", re.I)
HANDOFF = re.compile(
    r"\b(?:escalat\w*|transferr?\w* (?:you|this|the case)|hand(?:ed|ing)? (?:this|it|the case)"
    r" (?:over|off)|human agent|(?:a|our) (?:support )?engineer will|opened a (?:ticket|case)"
    r"|a technician will|connect(?:ing)? you (?:to|with))\b",
    re.I,
)
CONFIRMED = re.compile(
    r"\b(?:(?:that|it|this) (?:worked|did it|fixed it|solved it)|works now|working now"
    r"|(?:is|was|now) (?:resolved|fixed|solved)|problem solved|all good now|back to normal)\b",
    re.I,
)
STILL_FAILING = re.compile(
    r"\b(?:still (?:fails|failing|get|getting|see|seeing|the same|not|no)|same (?:error|failure"
    r"|result|problem|message)|did(?:n't| not) (?:help|work|fix)|does(?:n't| not) (?:help|work)"
    r"|no luck|made no difference|no change)\b",
    re.I,
)


def _words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if w not in _IGNORED and len(w) > 2}


def _ids(text: str) -> set[tuple[str, str]]:
    return {(str(kind), normalise_token(kind, raw)) for _, kind, raw in extract_tokens(text)}


def _changes(command: str) -> bool:
    """A command that changes something (a step), not one that only reads a state: asking
    for ``status`` output twice is diagnosis, not a repeated step."""
    return not (set(WORD.findall(command.lower())) & _READ_ONLY)


def _steps(text: str) -> list[tuple[str, str]]:
    """(key, sentence) of each step: a command in backticks that changes something, else a
    sentence starting with an action verb; sentences asking for output are not steps."""
    out: list[tuple[str, str]] = []
    for sentence in SENTENCE_BREAK.split(text):
        if _ASKS_OUTPUT.search(sentence):
            continue
        commands = _COMMAND.findall(sentence)
        if commands:
            out.extend((c.strip().lower(), sentence) for c in commands if _changes(c))
            continue
        words = WORD.findall(sentence.lower().lstrip("0123456789.-*) "))
        if words and words[0] in _ACTIONS:
            out.append((" ".join(words[:6]), sentence))
    return out


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _metric(score: float, why: str) -> MetricScore:
    return MetricScore(score=round(score, 3), justification=why[:600])


def _resolution(case: Case) -> tuple[ResolutionOutcome, MetricScore]:
    """The outcome is what the last answer leaves the customer with: a failure the customer
    reports in a query is the earlier answer's, which the next one goes on from."""
    events = case.events
    last = events[-1]
    failures = sum(1 for e in events if STILL_FAILING.search(e.query))
    if HANDOFF.search(last.answer):
        return "handed_off", _metric(0.75, "The last answer hands the case to a person.")
    if CONFIRMED.search(last.query) and not STILL_FAILING.search(last.query):
        return "resolved", _metric(0.93, "The customer confirms the issue is solved.")
    if INSUFFICIENT.search(last.answer):
        return "unresolved", _metric(
            0.2, f"Turn {last.turn_index}: the last answer says it cannot resolve the issue."
        )
    if failures >= len(events) >= 3:
        return "partial", _metric(
            0.5, f"Every one of the {failures} queries reports the last step failing."
        )
    return "resolved", _metric(
        0.8,
        "The last answer gives steps for the issue; the customer did not confirm the fix"
        + (f" ({failures} step(s) reported failing on the way)." if failures else "."),
    )


def _issue_tracking(case: Case) -> MetricScore:
    first = case.events[0]
    fields = f"{first.case.subject} {first.case.description}"
    terms = _words(fields)
    ids = _ids(fields) | _ids(first.query)
    off = [
        e.turn_index
        for e in case.events
        if len(_words(e.answer)) >= 4  # an acknowledgement says nothing of the issue
        and not (_words(e.answer) & terms)
        and not (_ids(e.answer) & ids)
    ]
    if not off:
        return _metric(0.9, "Every answer stays on the case's issue.")
    if len(off) * 2 >= len(case.events):
        return _metric(0.2, f"Answers of turns {off} are off the customer's issue.")
    return _metric(0.5, f"The answer of turn {off[0]} drifts off the customer's issue.")


def _workflow(case: Case) -> MetricScore:
    seen: dict[str, int] = {}  # step key -> turn it was given or tried in
    for message in case.events[0].history:
        if message.role == "user":
            for key, _ in _steps(message.content):
                seen.setdefault(key, -1)
    repeats: list[tuple[int, str]] = []
    for e in case.events:
        for key, _ in _steps(e.query):
            seen.setdefault(key, e.turn_index)  # a step the customer says they ran
        for key, sentence in _steps(e.answer):
            if key in seen and seen[key] != e.turn_index and not ACK.search(sentence):
                repeats.append((e.turn_index, key))
            seen.setdefault(key, e.turn_index)
    if not repeats:
        return _metric(0.9, "No step is repeated from an earlier turn.")
    turn, key = repeats[0]
    score = 0.45 if len(repeats) == 1 else 0.2
    return _metric(score, f"Turn {turn} repeats a step already given or tried: {key[:80]}.")


def _consistency(case: Case) -> MetricScore:
    """An identifier of an answer that is a near-miss of one the case, the customer, the
    evidence or an earlier answer used (the turn heuristic's identifier check)."""
    first = case.events[0]
    seen = [first.case.subject, first.case.description]
    seen.extend(m.content for m in first.history)
    for e in case.events:
        seen.append(e.query)
        seen.extend(c.text for c in e.contexts)
        text = "\n".join(seen)
        result = identifiers.check(identifiers.extract(e.answer), identifiers.extract(text), text)
        if result.near_misses:
            return _metric(
                0.15,
                f"Turn {e.turn_index} changes an identifier: {result.near_misses[0].describe()}.",
            )
        seen.append(e.answer)
    return _metric(0.92, "Identifiers stay the same across turns; no contradiction seen.")


def _effort(case: Case) -> MetricScore:
    events = case.events
    repeats = 0
    asked: list[set[str]] = []
    for e in events:
        words = _words(e.query)
        if any(_jaccard(words, before) >= 0.6 for before in asked):
            repeats += 1
        asked.append(words)
    failures = sum(1 for e in events if STILL_FAILING.search(e.query))
    score = 0.95 - 0.05 * max(0, len(events) - 2) - 0.2 * repeats - 0.05 * failures
    score = min(0.95, max(0.05, score))
    return _metric(
        score,
        f"{len(events)} turns, {repeats} repeated question(s), {failures} failure report(s).",
    )


def heuristic_case_scores(case: Case) -> CaseScores:
    """The case's scores by this module's rules (pure)."""
    outcome, resolution = _resolution(case)
    return CaseScores(
        resolution_outcome=outcome,
        resolution=resolution,
        issue_tracking=_issue_tracking(case),
        workflow_alignment=_workflow(case),
        consistency=_consistency(case),
        customer_effort=_effort(case),
    )


class HeuristicCaseJudge:
    """The offline case judge under the case judge protocol (no prompt: nothing is cut)."""

    def __init__(self, name: str = "heuristic", role: JudgeRole = "single") -> None:
        self._name = name
        self._role: JudgeRole = role

    @property
    def name(self) -> str:
        return self._name

    def judge_case(self, case: Case) -> tuple[CaseJudgment, int]:
        start = time.perf_counter()
        scores = heuristic_case_scores(case)
        judgment = CaseJudgment(
            judge=self._name,
            kind="heuristic",
            model=HEURISTIC_CASE_VERSION,
            role=self._role,
            status="ok",
            scores=scores,
            raw_output=scores.model_dump_json(),
            prompt_version=HEURISTIC_CASE_VERSION,
            latency_seconds=time.perf_counter() - start,
        )
        return judgment, case.turns_cut

    def close(self) -> None:
        pass
