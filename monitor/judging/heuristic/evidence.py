"""What the heuristic judge reads out of a turn: terms, identifiers, sentences, tried steps.

Pure text analysis with precompiled patterns and no state, so one ``analyse`` call per turn is
safe from any thread. The scoring rules that turn these observations into the eight metric
scores live in ``monitor.judging.heuristic.judge``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from monitor.judging.heuristic.identifiers import (
    Identifier,
    IdentifierCheck,
    IdKind,
    check,
    extract,
    extract_joined,
)
from monitor.judging.heuristic.lexicon import (
    ACK,
    ACTION_VERB_WORDS,
    CODE,
    EXPLAINS,
    GENERIC_WORDS,
    HOWTO,
    INSUFFICIENT,
    LEAD_IN,
    LIST_MARK,
    QUESTION,
    SENTENCE_BREAK,
    STOPWORDS,
    VAGUE,
    WHY,
    WORD,
)
from monitor.judging.heuristic.tokens import TEXT_CACHE_SIZE, remembered
from monitor.schema.turn import TurnEvent

Intent = Literal["instruct", "explain", "clarify"]

_NUMERIC_TOKEN_MIN = 3
_OBJECT_WINDOW = 4
_VAGUE_MAX_TERMS = 4


@lru_cache(maxsize=16384)
def stem(word: str) -> str:
    """A deliberately small stemmer: enough to match restart/restarted/restarting."""
    w = word
    stripped = False
    if len(w) > 5 and w.endswith("ing"):
        w, stripped = w[:-3], True
    elif len(w) > 5 and w.endswith("ed"):
        w, stripped = w[:-2], True
    elif len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    if stripped and len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":
        w = w[:-1]
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    return w


_GENERIC = frozenset(stem(w) for w in GENERIC_WORDS.split())
ACTION_VERBS = frozenset(stem(w) for w in ACTION_VERB_WORDS.split())


def words(text: str) -> list[str]:
    """Stems of the words of a text (stopwords removed, order kept)."""
    return list(_words(text))


# The readings of a text below are remembered for the last TEXT_CACHE_SIZE texts: pure
# functions of the text, and a case, a knowledge-base chunk or an earlier message comes back
# turn after turn. A word never spans a line break, so the words of texts joined by "\n" are
# the union of each text's: a turn's evidence is read part by part.
@remembered
@lru_cache(maxsize=TEXT_CACHE_SIZE)
def _words(text: str) -> tuple[str, ...]:
    out = []
    for token in WORD.findall(text.lower()):
        if token in STOPWORDS:
            continue
        if token.isdigit() and len(token) < _NUMERIC_TOKEN_MIN:
            continue
        out.append(stem(token) if token.isalpha() else token)
    return tuple(out)


@remembered
@lru_cache(maxsize=TEXT_CACHE_SIZE)
def word_set(text: str) -> frozenset[str]:
    """The set of ``words(text)``."""
    return frozenset(_words(text))


def key_terms(text: str) -> set[str]:
    """Stems that carry case content: no stopwords, no support-speak, no tiny words."""
    return set(frozen_key_terms(text))


@remembered
@lru_cache(maxsize=TEXT_CACHE_SIZE)
def frozen_key_terms(text: str) -> frozenset[str]:
    """``key_terms(text)``, frozen."""
    return frozenset(w for w in _words(text) if w not in _GENERIC and len(w) >= 3)


_FENCED = re.compile(r"(```.*?```)", re.DOTALL)


def split_sentences(text: str) -> list[str]:
    return list(_split_sentences(text))


@remembered
@lru_cache(maxsize=TEXT_CACHE_SIZE)
def _split_sentences(text: str) -> tuple[str, ...]:
    # Fenced code is one unit: a line of a command block is not a sentence.
    pieces: list[str] = []
    for block in _FENCED.split(text) if "```" in text else (text,):
        if block.startswith("```"):
            pieces.append(block)
        else:
            pieces.extend(p.strip() for p in SENTENCE_BREAK.split(block))
    return tuple(p for p in pieces if p and any(c.isalnum() for c in p))


@dataclass(frozen=True, slots=True)
class Sentence:
    text: str
    terms: frozenset[str]
    ids: tuple[Identifier, ...]
    question: bool
    action: bool
    acknowledges: bool
    insufficient: bool
    explains: bool
    verbs: tuple[tuple[str, frozenset[str]], ...]  # (verb stem, object terms)


def _actions(text: str) -> tuple[tuple[str, frozenset[str]], ...]:
    # Prose only: the words inside a command are matched as a command, not as a phrase.
    prose = CODE.sub(" ", text).lower()
    tokens = [t for t in WORD.findall(prose) if t not in STOPWORDS]
    found = []
    for i, token in enumerate(tokens):
        verb = stem(token)
        if verb in ACTION_VERBS:
            window = tokens[i + 1 : i + 1 + _OBJECT_WINDOW]
            objects = frozenset(
                stem(t) for t in window if t.isalpha() and stem(t) not in ACTION_VERBS
            )
            found.append((verb, objects - _GENERIC))
    return tuple(found)


_NOT_A_STEP_BEFORE = frozenset({"to", "the", "a", "an", "this", "that", "your", "its", "of", "no"})


def step_verbs(text: str) -> int:
    """How many steps a sentence prescribes: its action verbs, not purposes ("to stop the
    checks") or nouns ("the restart")."""
    tokens = WORD.findall(CODE.sub(" ", text).lower())
    return sum(
        1
        for i, token in enumerate(tokens)
        if stem(token) in ACTION_VERBS and (i == 0 or tokens[i - 1] not in _NOT_A_STEP_BEFORE)
    )


def analyse_sentence(text: str, ids: Sequence[Identifier] | None = None) -> Sentence:
    """One answer sentence; ``ids`` are the identifiers of the whole answer, if known."""
    ids = extract(text) if ids is None else tuple(i for i in ids if i.raw in text)
    has_command = any(i.kind is IdKind.COMMAND for i in ids)
    question, starts_with_action, acknowledges, insufficient, explains, verbs = _sentence(text)
    return Sentence(
        text=text,
        terms=frozen_key_terms(text),
        ids=ids,
        question=question,
        action=not question and (has_command or starts_with_action),
        acknowledges=acknowledges,
        insufficient=insufficient,
        explains=explains,
        verbs=verbs,
    )


@remembered
@lru_cache(maxsize=TEXT_CACHE_SIZE)
def _sentence(
    text: str,
) -> tuple[bool, bool, bool, bool, bool, tuple[tuple[str, frozenset[str]], ...]]:
    """What a sentence's words say, whatever its identifiers: question, starts with an action
    verb, acknowledges, says information is insufficient, explains, its verbs."""
    body = LEAD_IN.sub("", LIST_MARK.sub("", text)).strip()
    return (
        bool(QUESTION.search(body)),
        _starts_with_action(body),
        bool(ACK.search(text)),
        bool(INSUFFICIENT.search(text)),
        bool(EXPLAINS.search(text)),
        _actions(body),
    )


@dataclass(frozen=True, slots=True)
class ContextView:
    id: str
    terms: frozenset[str]
    keys: frozenset[str]  # need_key() of each identifier in the context
    actionable: bool


@dataclass(frozen=True, slots=True)
class TurnEvidence:
    """Everything the scoring rules need, computed once per turn."""

    intent: Intent
    needs: dict[str, float]  # key term or identifier -> weight
    contexts: tuple[ContextView, ...]
    subject_terms: frozenset[str]
    description_terms: frozenset[str]
    dialogue_terms: frozenset[str]  # case, history and query: what the conversation is about
    case_codes: tuple[Identifier, ...]
    support_vocab: frozenset[str]
    answer: tuple[Sentence, ...]
    answer_terms: frozenset[str]
    answer_ids: tuple[Identifier, ...]
    id_check: IdentifierCheck


def need_key(kind: IdKind, norm: str) -> str:
    """How an identifier appears among the needs of a turn and the keys of a context."""
    return f"{kind.value}:{norm}"


_WHAT_NEXT = re.compile(r"\bwhat (?:should|else|next)\b", re.I)


def infer_intent(query: str, query_ids: Sequence[Identifier] | None = None) -> Intent:
    """What kind of answer the query asks for (the Case-Aware paper's M5: instruct, explain or
    clarify)."""
    has_ids = bool(extract(query) if query_ids is None else query_ids)
    if WHY.search(query) and not _WHAT_NEXT.search(query):
        return "explain"
    n_terms = len(frozen_key_terms(query))
    if not has_ids and VAGUE.search(query) and n_terms <= _VAGUE_MAX_TERMS:
        return "clarify"
    if HOWTO.search(query) or has_ids:
        return "instruct"
    return "clarify" if n_terms <= 2 else "instruct"


def _needs(
    turn: TurnEvent, intent: Intent, case_ids: Sequence[Identifier], query_ids: Sequence[Identifier]
) -> dict[str, float]:
    needs: dict[str, float] = dict.fromkeys(frozen_key_terms(turn.case.subject), 1.0)
    # A vague follow-up ("it's acting weird now") says little about what evidence is needed.
    query_weight = 0.3 if intent == "clarify" else 1.0
    for term in frozen_key_terms(turn.query):
        needs.setdefault(term, query_weight)
    for ident in (*case_ids, *query_ids):
        # Error codes and articles are what a support engineer searches for first.
        if ident.kind in (IdKind.ERROR_CODE, IdKind.ARTICLE):
            needs[need_key(ident.kind, ident.norm)] = 3.0
        elif ident.kind is IdKind.VERSION:
            needs[need_key(ident.kind, ident.norm)] = 1.5
    return needs


def _context_view(cid: str, text: str) -> ContextView:
    terms, keys, actionable = _context_reading(text)
    return ContextView(id=cid, terms=terms, keys=keys, actionable=actionable)


@remembered
@lru_cache(maxsize=TEXT_CACHE_SIZE)
def _context_reading(text: str) -> tuple[frozenset[str], frozenset[str], bool]:
    ids = extract(text)
    actionable = any(i.kind is IdKind.COMMAND for i in ids) or any(
        _starts_with_action(s) for s in _split_sentences(text)
    )
    return frozen_key_terms(text), frozenset(need_key(i.kind, i.norm) for i in ids), actionable


def _starts_with_action(sentence: str) -> bool:
    body = LEAD_IN.sub("", LIST_MARK.sub("", sentence)).lower()
    first = WORD.search(body)
    return first is not None and stem(first.group(0)) in ACTION_VERBS


def coverage(needs: dict[str, float], terms: frozenset[str], keys: frozenset[str]) -> float:
    """Weighted share of the needs found among the terms or identifier keys."""
    total = math.fsum(needs.values())
    if total <= 0:
        return 1.0
    hit = math.fsum(w for need, w in needs.items() if need in terms or need in keys)
    return hit / total


def _dedup(groups: Sequence[Sequence[Identifier]]) -> tuple[Identifier, ...]:
    seen: dict[tuple[IdKind, str], Identifier] = {}
    for group in groups:
        for ident in group:
            seen.setdefault((ident.kind, ident.norm), ident)
    return tuple(seen.values())


def analyse(turn: TurnEvent) -> TurnEvidence:
    case_text = f"{turn.case.subject}\n{turn.case.description}"
    # Product and environment name the user's own resources (the LLM judges see them too).
    setting = "\n".join(x for x in (turn.case.product, turn.case.environment) if x)
    history = [m.content for m in turn.history]
    history_text = "\n".join(history)
    case_ids = extract(case_text)
    query_ids = extract(turn.query)
    history_ids = extract_joined(history)
    context_ids = [extract(c.text) for c in turn.contexts]
    evidence_ids = _dedup([case_ids, extract(setting), history_ids, query_ids, *context_ids])
    evidence_text = "\n".join(
        (case_text, setting, history_text, turn.query, *(c.text for c in turn.contexts))
    )
    answer_ids = extract(turn.answer)
    intent = infer_intent(turn.query, query_ids)
    # Read part by part (words never span the "\n" that joins them): the key terms of
    # case, history and query, and the words of all the evidence.
    dialogue = (case_text, *history, turn.query)
    evidence_parts = (*dialogue, setting, *(c.text for c in turn.contexts))
    return TurnEvidence(
        intent=intent,
        needs=_needs(turn, intent, case_ids, query_ids),
        contexts=tuple(_context_view(c.id, c.text) for c in turn.contexts),
        subject_terms=frozen_key_terms(turn.case.subject),
        description_terms=frozen_key_terms(turn.case.description),
        dialogue_terms=frozenset().union(*map(frozen_key_terms, dialogue)),
        case_codes=tuple(i for i in case_ids if i.kind is IdKind.ERROR_CODE),
        support_vocab=frozenset().union(*map(word_set, evidence_parts)),
        answer=tuple(analyse_sentence(s, answer_ids) for s in _split_sentences(turn.answer)),
        answer_terms=frozen_key_terms(turn.answer),
        answer_ids=answer_ids,
        id_check=check(answer_ids, evidence_ids, evidence_text),
    )


# ---------------------------------------------------------------- findings on the answer

_MIN_TERMS_FOR_CLAIM = 3
_SUPPORTED = 0.5
# A sentence whose identifiers all match the evidence needs less vocabulary support.
_ANCHORED = 0.3
# Share of a tried step's objects an answer step must mention to be the same step.
_SAME_STEP = 0.6


@dataclass(frozen=True, slots=True)
class Claims:
    """How the answer's claim sentences (not questions, not 'I don't know') are supported."""

    judged: int
    unsupported: tuple[str, ...]  # sentences resting on identifiers found in no evidence
    novel_ids: tuple[str, ...]  # those identifiers, outermost only (a flag inside a command)
    invented: int  # invented steps or facts: per sentence, its novel ids up to its action verbs
    corrupted: int  # sentences carrying a near-miss of an evidence identifier
    unmoored: tuple[str, ...]  # sentences whose words are mostly absent from the evidence


def outermost(raws: Sequence[str]) -> list[str]:
    """The strings not contained in another one: a flag inside a command is one finding."""
    unique = list(dict.fromkeys(raws))
    return [r for r in unique if not any(r != o and r in o for o in unique)]


def claims(ev: TurnEvidence) -> Claims:
    novel = {(i.kind, i.norm) for i in ev.id_check.novel if not i.weak}
    near = {(m.found.kind, m.found.norm) for m in ev.id_check.near_misses}
    near_raws = [m.found.raw for m in ev.id_check.near_misses]
    judged = corrupted = invented = 0
    unsupported: list[str] = []
    novel_ids: list[str] = []
    unmoored: list[str] = []
    for s in ev.answer:
        if s.question or s.insufficient:
            continue
        # A new command that only differs by a corrupted key is the corruption, not invention.
        s_novel = [
            i.raw
            for i in s.ids
            if (i.kind, i.norm) in novel and not any(n in i.raw for n in near_raws)
        ]
        s_near = any((i.kind, i.norm) in near for i in s.ids)
        if len(s.terms) < _MIN_TERMS_FOR_CLAIM and not s_novel and not s_near:
            continue  # "Hope this helps." is not a claim
        judged += 1
        support = len(s.terms & ev.support_vocab) / len(s.terms) if s.terms else 1.0
        if s_novel:
            unsupported.append(s.text)
            novel_ids.extend(s_novel)
            # "Set x=1 in /etc/a.conf" is one invented step; "clear X and set Y" is two.
            invented += min(len(outermost(s_novel)), max(1, step_verbs(s.text)))
        elif s_near:
            corrupted += 1
        elif support < _SUPPORTED and not (s.ids and support >= _ANCHORED):
            unmoored.append(s.text)
    return Claims(
        judged,
        tuple(unsupported),
        tuple(outermost(novel_ids)),
        invented,
        corrupted,
        tuple(unmoored),
    )
