"""Rubric grading over an OpenAI-compatible endpoint (Pencils Down phases 1 and 2).

The HTTP side is the case-aware judge's: an ``OpenAIJudge`` built from the same
``JudgeConfig`` sends every request through ``OpenAIJudge.complete``, so client construction,
transport retries with the one ``Backoff``, Retry-After handling, the json_schema → JSON-mode
fallback and the translation of openai errors are shared, not repeated. What is rubric-specific
here is the fan-out and the parsing:

- one request per (question, passage); at most ``concurrency`` requests in flight per grader;
- an unusable reply is not retried: it is graded by ``parse_grade`` (1, or 0 for a refusal),
  as Pencils Down does, and its parse path is kept;
- fail-closed: when any request of a text fails after the transport retries, the whole text
  fails with ``RubricGradingFailed`` and no grade of it is used (a partial rubric would report
  a coverage the answer never earned); its questions not asked yet are skipped and the ones
  being asked are waited for, so the error carries what the text spent;
- the fan-out is the CLI's (``monitor.runtime.workers.fan_out``): a Ctrl-C while a text is
  graded cancels its questions not asked yet and reaches the command at once.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog

from monitor.config.judges import JudgeConfig
from monitor.errors import (
    ConfigError,
    JudgeError,
    JudgeFatalError,
    JudgeTransientError,
    RubricGradingFailed,
)
from monitor.judging.openai_judge import Completion, OpenAIJudge
from monitor.judging.passages import MAX_PASSAGE_TOKENS, TOKENIZER, split_passages, truncate
from monitor.judging.rubric_prompt import (
    GENERATION_PROMPT_VERSION,
    GRADE_JSON_SCHEMA,
    GRADING_PROMPT_VERSION,
    PARSE_PATHS,
    QUESTIONS_JSON_SCHEMA,
    ParsePath,
    build_generation_messages,
    build_grading_messages,
    parse_grade,
    parse_questions,
)
from monitor.judging.rubric_scoring import coverage, relevance
from monitor.judging.rubric_set import RubricEntry
from monitor.runtime.clock import Clock
from monitor.runtime.workers import fan_out

_log = structlog.get_logger("monitor.judging.rubric_grader")


@dataclass(frozen=True)
class QuestionGrade:
    question: str
    grade: int
    answer: str  # extracted by the grader, for people checking the grade
    path: ParsePath
    passage: int  # which passage of the text earned the grade (0-based)
    raw: str  # the grader's reply for that passage, for audit


@dataclass(frozen=True)
class TextGrading:
    """One text (a ranked passage or a whole answer) graded on every question of an entry."""

    entry_id: str
    grades: tuple[QuestionGrade, ...]
    passages: int
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    path_counts: dict[str, int] = field(default_factory=dict)  # over every (question, passage)

    @property
    def values(self) -> list[int]:
        return [g.grade for g in self.grades]

    def relevance(self, m: int = 1) -> int:
        return relevance(self.values, m)

    def coverage(self, threshold: int = 4) -> float:
        return coverage(self.values, threshold)


@dataclass(frozen=True)
class _Graded:
    question: int
    passage: int
    grade: int
    answer: str
    path: ParsePath
    raw: str
    completion: Completion


class _Skipped:
    """A question not asked: an earlier one of the text failed, or the grader was closed."""


_SKIPPED = _Skipped()


def require_llm_judge(name: str, config: JudgeConfig) -> None:
    """ConfigError unless judge ``name`` can write and grade rubric questions (an LLM)."""
    if config.kind != "openai":
        what = "the offline heuristic" if config.kind == "heuristic" else repr(config.kind)
        raise ConfigError(
            f"rubric questions are written and graded by an LLM, and judge {name!r} is "
            f"{what}: configure an OpenAI-compatible judge, e.g. judges.grader: {{kind: "
            "openai, base_url: https://api.openai.com/v1, model: gpt-4o-mini, api_key_env: "
            "OPENAI_API_KEY}, and select it with rubric.judge: grader (or --judge grader)"
        )


class RubricGrader:
    """Thread-safe. ``close()`` releases the HTTP pool and the worker threads, at once."""

    def __init__(
        self,
        name: str,
        config: JudgeConfig,
        *,
        concurrency: int = 4,
        max_passage_tokens: int = MAX_PASSAGE_TOKENS,
        clock: Clock | None = None,
    ) -> None:
        require_llm_judge(name, config)
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.name = name
        self.model = config.model
        self.max_passage_tokens = max_passage_tokens
        self._judge = OpenAIJudge(name, config, clock=clock)
        # Each text fans out on daemon threads of its own (workers.fan_out): a grading
        # abandoned at a stop never holds the process. The slots bound the requests in flight
        # over every text being graded, should several threads grade at once.
        self._concurrency = concurrency
        self._slots = threading.BoundedSemaphore(concurrency)
        self._closed = threading.Event()
        self._warned: set[str] = set()
        self._warn_lock = threading.Lock()

    def fingerprint(self) -> str:
        """What identifies a grading configuration (stored with every grading)."""
        return (
            f"{GRADING_PROMPT_VERSION}|{TOKENIZER}:{self.max_passage_tokens}|"
            f"{self.name}:{self.model}"
        )

    def close(self) -> None:
        # Never waits: questions not asked yet are skipped, the ones being asked fail as the
        # endpoint closes under them, and a grading under way fails with the reason.
        self._closed.set()
        self._judge.close()

    def warn_if_unreviewed(self, entry: RubricEntry) -> bool:
        """Log once per entry that its questions were never checked by a person."""
        if entry.reviewed:
            return False
        with self._warn_lock:
            first = entry.id not in self._warned
            self._warned.add(entry.id)
        if first:
            _log.warning(
                "rubric.unreviewed",
                entry=entry.id,
                detail="grading with generated questions no person has checked (reviewed: false)",
            )
        return True

    # ------------------------------------------------------------------ grading

    def grade_passage(self, entry: RubricEntry, text: str) -> TextGrading:
        """A ranked passage keeps its id, so it is truncated to the passage limit."""
        return self._grade(entry, [truncate(text, self.max_passage_tokens)])

    def grade_answer(self, entry: RubricEntry, text: str) -> TextGrading:
        """A generated answer is split into passages; each question keeps its best grade."""
        return self._grade(entry, split_passages(text, self.max_passage_tokens))

    def _ask(self, question: int, passage: int, q_text: str, p_text: str) -> _Graded:
        messages = build_grading_messages(q_text, p_text)
        completion = self._judge.complete(messages, "rubric_grade", GRADE_JSON_SCHEMA)
        parsed = parse_grade(completion.content)
        return _Graded(
            question,
            passage,
            parsed.grade,
            parsed.answer,
            parsed.path,
            completion.content,
            completion,
        )

    def _grade(self, entry: RubricEntry, passages: Sequence[str]) -> TextGrading:
        self.warn_if_unreviewed(entry)
        asks = [
            (qi, pi, q.question, p)
            for pi, p in enumerate(passages)
            for qi, q in enumerate(entry.questions)
        ]
        failed = threading.Event()  # set by the first failure: the questions after it are skipped

        def ask(item: tuple[int, int, str, str]) -> _Graded | _Skipped | Exception:
            # Never raises, so every call is waited for: a failure skips the questions not
            # asked yet and the ones being asked finish, which keeps the text's spending
            # exact and no request of it outliving the call.
            with self._slots:
                if failed.is_set() or self._closed.is_set():
                    return _SKIPPED
                try:
                    return self._ask(*item)
                except Exception as exc:  # handed to the caller, as a future would
                    failed.set()
                    return exc

        # fan_out: a Ctrl-C while waiting cancels the questions not asked yet (workers.py).
        outcomes = list(fan_out(ask, asks, max(1, min(self._concurrency, len(asks))), "rubric"))
        results = [o for o in outcomes if isinstance(o, _Graded)]
        errors = [o for o in outcomes if isinstance(o, Exception)]
        if errors or len(results) < len(outcomes):
            if errors:
                error = _failure(entry.id, errors[0])
            else:  # close() came before any question failed
                error = RubricGradingFailed(
                    f"rubric grading of {entry.id} stopped: the grader was closed", "connection"
                )
            error.requests = sum(r.completion.requests for r in results) + len(errors)
            error.cost_usd = sum(r.completion.cost_usd for r in results)
            raise error
        best: dict[int, _Graded] = {}
        for r in results:
            if r.question not in best or r.grade > best[r.question].grade:
                best[r.question] = r
        grades = tuple(
            QuestionGrade(
                q.question,
                best[i].grade,
                best[i].answer,
                best[i].path,
                best[i].passage,
                best[i].raw,
            )
            for i, q in enumerate(entry.questions)
        )
        paths = Counter(r.path for r in results)
        return TextGrading(
            entry_id=entry.id,
            grades=grades,
            passages=len(passages),
            requests=sum(r.completion.requests for r in results),
            input_tokens=sum(r.completion.input_tokens for r in results),
            output_tokens=sum(r.completion.output_tokens for r in results),
            cost_usd=sum(r.completion.cost_usd for r in results),
            path_counts={p: paths.get(p, 0) for p in PARSE_PATHS},
        )

    # ------------------------------------------------------------------ generation

    def generate_questions(self, query: str) -> list[str]:
        """Pencils Down Table 1: up to 10 questions for ``query`` (for people to review).
        Raises ``RubricGradingFailed`` when the endpoint fails or the reply holds none."""
        messages = build_generation_messages(query)
        try:
            completion = self._judge.complete(messages, "rubric_questions", QUESTIONS_JSON_SCHEMA)
            return parse_questions(completion.content)
        except JudgeError as exc:
            raise _failure("(generation)", exc) from exc


def _failure(what: str, exc: BaseException | None) -> RubricGradingFailed:
    if isinstance(exc, JudgeTransientError | JudgeFatalError):
        reason = exc.reason
    elif isinstance(exc, JudgeError):
        reason = "invalid_output"
    else:
        reason = "internal"
        _log.error("rubric.internal_error", entry=what, error=type(exc).__name__)
    return RubricGradingFailed(f"rubric grading of {what} failed: {exc}", reason)


__all__ = [
    "GENERATION_PROMPT_VERSION",
    "GRADING_PROMPT_VERSION",
    "QuestionGrade",
    "RubricGrader",
    "RubricGradingFailed",
    "TextGrading",
]
