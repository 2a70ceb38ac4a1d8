"""Workflow constraints: steps the conversation rules out, and answers that ignore them.

Two kinds of constraint, both read from text (the Case-Aware paper's M8, resolution alignment):

- what the user says was already done or failed ("purged it exactly like that, same error"),
  or cannot or may not be done ("restarting the controller is not an option", "finance will not
  allow turning off automatic tax"); an answer that prescribes one of these steps again, without
  acknowledging it, sends the user round in a circle;
- what the evidence forbids ("never void an invoice that has a payment applied", "quota changes
  on a locked tenant are not supported"); an answer that prescribes it is wrong and may do harm.

A step is a verb family (``raise`` and ``set`` are one "change"; ``turn off`` is "disable") and
the content words of its clause; two steps are the same when the families agree and they share
most of the objects, or they run the same command or touch the same configuration key.

Pure functions over the text and the already analysed turn: no I/O, no state.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from monitor.judging.heuristic.evidence import (
    ACTION_VERBS,
    Sentence,
    TurnEvidence,
    frozen_key_terms,
    key_terms,
    split_sentences,
    stem,
)
from monitor.judging.heuristic.identifiers import Identifier, IdKind, extract
from monitor.judging.heuristic.lexicon import (
    ACK,
    ASKS_FOR,
    BACK_REFERENCE,
    BACK_REFERENCE_MORE,
    CLAUSE_BREAK,
    CODE,
    CONDITIONAL,
    DONE,
    NEGATED,
    NOT_A_STEP_BEFORE,
    PHRASAL_VERBS,
    PROHIBITION_STATE,
    PROHIBITION_VERB,
    REFUSED,
    STOPWORDS,
    TRIED,
    VERB_FAMILIES,
    WORD,
)
from monitor.judging.heuristic.tokens import TEXT_CACHE_SIZE, remembered
from monitor.schema.turn import TurnEvent

__all__ = ["Finding", "PastStep", "Prohibition", "Step", "Workflow", "steps_in", "workflow"]

_FAMILY = {stem(v): family for family, verbs in VERB_FAMILIES.items() for v in verbs.split()}
_OBJECT_WINDOW = 6
# Share of the objects of both steps (intersection over union) that makes them one step.
_SAME_STEP = 0.6
_CLAUSES = re.compile(r"[,.;:!?()]+(?:\s|$)|\s[-–—]\s")

_QUOTE = 160


@dataclass(frozen=True, slots=True)
class Step:
    family: str  # the verb's family, or its stem when it has none
    objects: frozenset[str]


@dataclass(frozen=True, slots=True)
class PastStep:
    """A step the user says was done or failed (``refused`` False) or cannot be done (True)."""

    quote: str
    refused: bool
    commands: frozenset[str]
    keys: frozenset[str]  # configuration keys and URLs it names
    steps: tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class Prohibition:
    quote: str
    families: frozenset[str]  # empty when the rule names a state ("... is not supported")
    terms: frozenset[str]  # the content words of the rule, verbs left out


@dataclass(frozen=True, slots=True)
class Finding:
    step: str  # the answer's step, shortened
    source: str  # the words that rule it out


@dataclass(frozen=True, slots=True)
class Workflow:
    past: tuple[PastStep, ...]
    repeats: tuple[Finding, ...]  # answer steps the user said were done, failed or refused
    refused: int  # ... of which refused or impossible
    violations: tuple[Finding, ...]  # answer steps the evidence forbids
    prescriptive: int  # answer sentences that prescribe a step


def _family(word: str) -> str | None:
    s = stem(word)
    if s in _FAMILY:
        return _FAMILY[s]
    return s if s in ACTION_VERBS else None


def _prose(text: str) -> str:
    prose = CODE.sub(" ", text)
    for pattern, verb in PHRASAL_VERBS:
        prose = pattern.sub(verb, prose)
    return prose.lower()


def steps_in(text: str, *, purposes: bool = False) -> tuple[Step, ...]:
    """The steps a text names: each action verb with the content words of its clause.

    ``purposes=False`` leaves out verbs after "to", "the", ... ("to stop the checks", "the
    restart"): what an answer prescribes. Past and refused steps keep them ("we tried to
    restart the agent", "not allowed to restart").
    """
    return _steps_in(text, purposes)


# The readings of a text below are remembered for the last TEXT_CACHE_SIZE texts (pure
# functions of the text; a case, a knowledge-base chunk or an earlier message comes back).
@remembered
@lru_cache(maxsize=TEXT_CACHE_SIZE)
def _steps_in(text: str, purposes: bool) -> tuple[Step, ...]:
    found: list[Step] = []
    for clause in _CLAUSES.split(_prose(text)):
        tokens = WORD.findall(clause)
        for i, token in enumerate(tokens):
            family = _family(token)
            if family is None:
                continue
            if not purposes and i and tokens[i - 1] in NOT_A_STEP_BEFORE:
                continue
            objects: list[str] = []
            for word in tokens[i + 1 : i + 1 + _OBJECT_WINDOW]:
                if word in CLAUSE_BREAK:
                    break
                if word in STOPWORDS or not word.isalpha() or _family(word) is not None:
                    continue
                objects.append(stem(word))
            found.append(Step(family, frozenset(objects) & frozen_key_terms(clause)))
    return tuple(found)


# ---------------------------------------------------------------- what the user ruled out


def _past_steps(turn: TurnEvent) -> list[PastStep]:
    found: list[PastStep] = []
    previous_assistant = ""
    sources: list[tuple[str, str]] = [("user", turn.case.description)]
    sources += [(m.role, m.content) for m in turn.history]
    sources.append(("user", turn.query))
    for role, content in sources:
        if role != "user":
            previous_assistant = content if role == "assistant" else previous_assistant
            continue
        for sentence in split_sentences(content):
            said = _user_said(sentence)
            if said is None:
                continue
            refused, commands, keys, steps, back = said
            # "Did that, same error": the step is the previous assistant turn's.
            if previous_assistant and not refused and (back or not (commands or keys or steps)):
                earlier = extract(previous_assistant)
                commands |= {i.norm for i in earlier if i.kind is IdKind.COMMAND}
                keys |= _step_keys(earlier)
            if commands or keys or steps:
                found.append(
                    PastStep(
                        " ".join(sentence.split())[:_QUOTE],
                        refused,
                        frozenset(commands),
                        frozenset(keys),
                        steps,
                    )
                )
    return found


@remembered
@lru_cache(maxsize=TEXT_CACHE_SIZE)
def _user_said(
    sentence: str,
) -> tuple[bool, frozenset[str], frozenset[str], tuple[Step, ...], bool] | None:
    """A user's sentence that says a step was done, failed or cannot be done: (refused, its
    commands, its keys, its steps, refers back); None for any other sentence."""
    refused = bool(REFUSED.search(sentence))
    if not (refused or TRIED.search(sentence) or DONE.search(sentence)):
        return None
    ids = extract(sentence)
    commands = frozenset(i.norm for i in ids if i.kind is IdKind.COMMAND)
    keys = frozenset(_step_keys(ids))
    steps = tuple(s for s in steps_in(sentence, purposes=True) if s.objects)
    back = bool(BACK_REFERENCE.search(sentence) or BACK_REFERENCE_MORE.search(sentence))
    return refused, commands, keys, steps, back


def _same_step(answer: Sequence[Step], past: Sequence[Step]) -> bool:
    """Same verb family, and most of the objects of both in common ("restart the controller"
    and "restarting the controller pods"; not "clear the router's DNS cache" and "flushed the
    DNS cache on the laptops")."""
    return any(
        a.family == p.family
        and bool(p.objects)
        and (
            (
                bool(a.objects) and a.objects <= p.objects
            )  # "the controller" of "the controller pods"
            or len(a.objects & p.objects) >= math.ceil(_SAME_STEP * len(a.objects | p.objects))
        )
        for a in answer
        for p in past
    )


def _step_keys(ids: Iterable[Identifier]) -> set[str]:
    """Settings a step changes: dotted or slashed keys, UPPER_CASE variables, URLs (a
    snake_case name is as often a volume or a slot as a setting)."""
    return {
        i.norm
        for i in ids
        if i.kind is IdKind.URL
        or (i.kind is IdKind.CONFIG_KEY and (any(c in i.norm for c in "./") or i.norm.isupper()))
    }


# ---------------------------------------------------------------- what the evidence forbids


def _prohibitions(texts: Iterable[str]) -> list[Prohibition]:
    found: list[Prohibition] = []
    for text in texts:
        found.extend(_text_prohibitions(text))
    return found


_CLAUSE_END = re.compile(r"[;:](?:\s|$)")


@remembered
@lru_cache(maxsize=TEXT_CACHE_SIZE)
def _text_prohibitions(text: str) -> tuple[Prohibition, ...]:
    found: list[Prohibition] = []
    for sentence in split_sentences(text):
        for clause in _CLAUSE_END.split(sentence):
            found.extend(_clause_prohibitions(clause))
    return tuple(found)


def _clause_prohibitions(clause: str) -> Iterable[Prohibition]:
    quote = " ".join(clause.split())[:_QUOTE]
    for m in PROHIBITION_VERB.finditer(clause):
        before = clause[: m.start()]
        if CONDITIONAL.search(before.split(",")[-1]):
            continue
        verbs = [m.group(1), *re.findall(r"[a-z]+", m.group(2) or "")]
        verbs = [v for v in verbs if v.lower() not in {"or", "and", "nor"}]
        families = {_family(v) or stem(v.lower()) for v in verbs}
        rest = re.split(r",\s", clause[m.end() :])[0]
        terms = key_terms(f"{before} {rest}") - {stem(v.lower()) for v in verbs}
        yield Prohibition(quote, frozenset(families), frozenset(terms))
    for m in PROHIBITION_STATE.finditer(clause):
        before = clause[: m.start()].split(",")[-1]
        if CONDITIONAL.search(before):
            continue
        families = {f for f in (_family(w) for w in WORD.findall(before.lower())) if f}
        verb_stems = {stem(w) for w in WORD.findall(before.lower()) if _family(w)}
        yield Prohibition(quote, frozenset(families), frozenset(key_terms(before) - verb_stems))


def _violates(s: Sentence, rule: Prohibition) -> bool:
    shared = rule.terms & s.terms
    if not rule.families:
        return len(shared) >= 2
    return bool(rule.families & _verb_words(s.text)) and len(shared) >= 1


@remembered
@lru_cache(maxsize=TEXT_CACHE_SIZE)
def _verb_words(text: str) -> frozenset[str]:
    """The verb families and the word stems of a sentence (what a rule's verbs are met by)."""
    words = {f for f in (_family(w) for w in WORD.findall(_prose(text))) if f}
    words |= {stem(w) for w in WORD.findall(text.lower())}
    return frozenset(words)


_NO = re.compile(r"\b(?:no|not|nothing)\b", re.I)


@remembered
@lru_cache(maxsize=TEXT_CACHE_SIZE)
def _negative(text: str) -> bool:
    return bool(NEGATED.search(text) or _NO.search(text))


def _engages(answer: Sequence[Sentence], rule: Prohibition) -> bool:
    """The answer speaks to the rule's condition in the negative ("no running connector")."""
    return any(_negative(s.text) and s.terms & rule.terms for s in answer)


# ---------------------------------------------------------------- the answer against both


_NUMBERING = re.compile(r"^\W*(?:\d+[.)]\s*)?")


def _prescribes(s: Sentence) -> bool:
    """An imperative ("Turn off ...", "Restart ...") or a command to run."""
    if s.question or s.insufficient or ASKS_FOR.search(s.text):
        return False
    if s.action or any(i.kind is IdKind.COMMAND for i in s.ids):
        return True
    first = WORD.search(_prose(_NUMBERING.sub("", s.text, count=1)))
    return first is not None and _family(first.group(0)) is not None


def workflow(turn: TurnEvent, ev: TurnEvidence) -> Workflow:
    past = _past_steps(turn)
    evidence_texts = [c.text for c in turn.contexts]
    evidence_texts += [m.content for m in turn.history if m.role in ("assistant", "agent")]
    rules = [r for r in _prohibitions(evidence_texts) if not _engages(ev.answer, r)]
    repeats: list[Finding] = []
    violations: list[Finding] = []
    refused = prescriptive = 0
    for n, s in enumerate(ev.answer):
        if not _prescribes(s) or NEGATED.search(s.text):
            continue
        prescriptive += 1
        text = s.text
        if text.rstrip().endswith(":") and n + 1 < len(ev.answer):
            text += "\n" + ev.answer[n + 1].text  # "Set this annotation:\n<the annotation>"
        short = " ".join(s.text.split())[:60]
        if past and not ACK.search(s.text):
            # Read only when there is a past step to compare with.
            ids = extract(text)
            commands = {i.norm for i in ids if i.kind is IdKind.COMMAND}
            keys = _step_keys(ids)
            steps = steps_in(text)
            for p in past:
                # The same key, changed the same way ("raised X" / "set X"), not another
                # step that happens to name it.
                same_key = bool(keys & p.keys) and (
                    not p.steps
                    or any(
                        a.family == q.family and (not q.objects or a.objects & q.objects)
                        for a in steps
                        for q in p.steps
                    )
                )
                same_command = sorted(commands & p.commands)
                if same_command or same_key or _same_step(steps, p.steps):
                    repeats.append(
                        Finding(f"`{same_command[0]}`" if same_command else short, p.quote)
                    )
                    refused += p.refused
                    break
        for rule in rules:
            if _violates(s, rule):
                violations.append(Finding(short, rule.quote))
                break
    return Workflow(tuple(past), tuple(repeats), refused, tuple(violations), prescriptive)
