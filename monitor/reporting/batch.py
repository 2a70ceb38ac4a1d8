"""Batch judging of a JSONL file of turn events, and reading the files it writes.

``run_batch`` streams the input (one turn event per line), judges turns on a thread pool
(judges are synchronous and thread-safe) with a bounded number of pending turns, and writes
each verdict as soon as it completes, so a crash loses at most the turns in flight. Two outputs
(seed 004 A.2): the granular file (one ``Verdict`` per line with raw judge output, attempts,
tokens, cost, latency) and the compact file (case, answer, context ids, S_final, bands).

With a ``redactor`` (the daemon's ``redaction`` settings) each turn is pseudonymized
before a judge sees it, as in the daemon; a turn too large to redact is rejected
(``redaction_too_large``), never judged raw.

A bad line never stops the run: it is reported on stderr with its line number and written to
the rejects file. A rerun with the same ``--out`` resumes: turns whose verdict (from the same
judge configuration) is already in the granular file are skipped.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import structlog
from pydantic import ValidationError
from tqdm import tqdm

from consumers.decode import decode_turn
from consumers.records import RawMessage
from monitor.errors import InvalidEvent, validation_error_lines
from monitor.judging.evaluator import Evaluator, evaluate_guarded
from monitor.models import Band, TurnEvent, Verdict
from monitor.redaction import Redactor, TooLargeToRedact

log = structlog.get_logger(__name__)

REJECT_RAW_CHARS = 500  # enough to recognise the line, not a copy of a huge record
MAX_LINE_BYTES = 16 << 20  # a line this long is not a turn event; never parse it
_PENDING_PER_WORKER = 2  # queued turns per worker: keeps workers busy, memory bounded
_STDERR_REJECTS = 20  # a wholly broken input should not flood the terminal


# ---------------------------------------------------------------- summary


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
    def turns_per_second(self) -> float:
        return self.judged / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0

    def add(self, verdict: Verdict) -> None:
        self.judged += 1
        if verdict.status != "ok" or verdict.s_final is None:
            self.judge_failed += 1
        self._tally(verdict)

    def add_existing(self, verdict: Verdict | None) -> None:
        """A turn skipped because ``--out`` already holds its verdict (a resumed run)."""
        self.skipped_existing += 1
        if verdict is not None:
            self._tally(verdict)

    def _tally(self, verdict: Verdict) -> None:
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


# ---------------------------------------------------------------- decoding


def decode_line(raw: bytes, number: int = 0) -> TurnEvent:
    """One input line → TurnEvent, by the same rules (and reasons) as a Kafka record."""
    return decode_turn(RawMessage("file", 0, number, raw), MAX_LINE_BYTES)


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    # Binary mode: a bad UTF-8 byte must reject one line, not abort the whole file.
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            stripped = raw.strip()
            if stripped:
                yield number, stripped


def _count_lines(path: Path) -> int:
    count = 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            count += chunk.count(b"\n")
    return count


def default_rejects_path(out_path: Path) -> Path:
    return out_path.with_suffix(".rejects.jsonl")


# ---------------------------------------------------------------- resuming


def _drop_partial_last_line(path: Path) -> None:
    """A crash mid-write leaves a line without its newline; cut it so appends stay valid."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        pos = size
        while pos > 0:
            step = min(1 << 16, pos)
            pos -= step
            f.seek(pos)
            cut = f.read(step).rfind(b"\n")
            if cut >= 0:
                f.truncate(pos + cut + 1)
                break
        else:
            f.truncate(0)
    log.warning("partial_line_dropped", path=str(path))


def existing_verdicts(out_path: Path, config_hash: str) -> dict[str, Verdict | None]:
    """The verdicts already judged into ``out_path`` under the same judge configuration, by
    event id (None for a line whose event id is readable but not the whole verdict)."""
    done: dict[str, Verdict | None] = {}
    if not out_path.exists():
        return done
    with out_path.open("rb") as f:
        for raw in f:
            try:
                doc = json.loads(raw)
            except ValueError:
                continue  # a corrupt line: that turn is judged again
            if isinstance(doc, dict) and doc.get("judge_config_hash") == config_hash:
                event_id = doc.get("event_id")
                if isinstance(event_id, str):
                    try:
                        done[event_id] = Verdict.model_validate(doc)
                    except ValidationError:
                        done[event_id] = None
    return done


# ---------------------------------------------------------------- the runner


def _evaluate(evaluator: Evaluator, turn: TurnEvent) -> tuple[TurnEvent, Verdict]:
    return turn, evaluate_guarded(evaluator, turn)


def _redacted(redactor: Redactor, turn: TurnEvent) -> TurnEvent:
    try:
        return redactor.redact_turn(turn).turn
    except TooLargeToRedact as exc:
        raise InvalidEvent("redaction_too_large", str(exc)) from None


class _Writer:
    """Line-buffered JSONL outputs of a run; only the submitting thread writes."""

    def __init__(self, out: Path, compact: Path | None, rejects: Path) -> None:
        _drop_partial_last_line(out)
        self._out: IO[str] = out.open("a", encoding="utf-8")
        self._compact: IO[str] | None = None
        self._rejects: IO[str] | None = None
        try:
            if compact is not None:
                _drop_partial_last_line(compact)
                self._compact = compact.open("a", encoding="utf-8")
            # The rejects file describes this run's input, so it starts empty each run.
            self._rejects = rejects.open("w", encoding="utf-8")
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _put(f: IO[str], line: str) -> None:
        f.write(line + "\n")
        f.flush()

    def verdict(self, turn: TurnEvent, verdict: Verdict) -> None:
        # Compact first: a granular line (what resume trusts) then implies its compact line.
        if self._compact is not None:
            self._put(self._compact, json.dumps(verdict.compact(turn), ensure_ascii=False))
        self._put(self._out, verdict.model_dump_json())

    def reject(self, record: dict[str, Any]) -> None:
        if self._rejects is not None:
            self._put(self._rejects, json.dumps(record, ensure_ascii=False))

    def close(self) -> None:
        for f in (self._out, self._compact, self._rejects):
            if f is not None:
                f.close()


def run_batch(
    input_path: Path,
    out_path: Path,
    compact_path: Path | None,
    evaluator: Evaluator,
    concurrency: int = 8,
    rejects_path: Path | None = None,
    progress: bool = False,
    *,
    redactor: Redactor | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> BatchSummary:
    """Judge every turn of ``input_path``; see the module docstring for the contract.

    Raises OSError when the input cannot be read or an output cannot be written.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    summary = BatchSummary()
    started = monotonic()
    existing = existing_verdicts(out_path, evaluator.config_hash)
    seen: set[str] = set()
    rejects_path = rejects_path or default_rejects_path(out_path)
    show = progress and sys.stderr.isatty()
    total = _count_lines(input_path) if show else None  # before opening the outputs: may raise
    writer = _Writer(out_path, compact_path, rejects_path)
    bar = tqdm(
        total=total,
        disable=not show,
        unit="turn",
        file=sys.stderr,
        dynamic_ncols=True,
    )
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="casewatch-judge")
    pending: set[Future[tuple[TurnEvent, Verdict]]] = set()

    def drain(until: int) -> None:
        while len(pending) > until:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                pending.discard(fut)
                turn, verdict = fut.result()
                writer.verdict(turn, verdict)
                summary.add(verdict)
                bar.update(1)

    try:
        for number, raw in _lines(input_path):
            summary.read += 1
            try:
                turn = decode_line(raw, number)
                if redactor is not None:
                    turn = _redacted(redactor, turn)
            except InvalidEvent as exc:
                summary.rejected += 1
                if summary.rejected <= _STDERR_REJECTS:
                    msg = f"line {number}: rejected ({exc.reason}): {exc.detail}"
                    if summary.rejected == _STDERR_REJECTS:
                        msg += f"\n(further rejected lines are only listed in {rejects_path})"
                    tqdm.write(msg, file=sys.stderr)
                writer.reject(
                    {
                        "line": number,
                        "reason": exc.reason,
                        "detail": exc.detail,
                        "raw": raw[:REJECT_RAW_CHARS].decode("utf-8", errors="replace"),
                    }
                )
                bar.update(1)
                continue
            if turn.event_id in existing:
                # A repeated line counts as skipped again, but is tallied once.
                summary.add_existing(None if turn.event_id in seen else existing[turn.event_id])
                seen.add(turn.event_id)
                bar.update(1)
                continue
            if turn.event_id in seen:
                summary.duplicates += 1  # a replayed event: judged once
                bar.update(1)
                continue
            seen.add(turn.event_id)
            pending.add(pool.submit(_evaluate, evaluator, turn))
            drain(until=_PENDING_PER_WORKER * concurrency - 1)
        drain(until=0)
    except KeyboardInterrupt:
        # Ctrl-C: keep what is written (a rerun resumes from it); turns in flight are dropped
        # and judged again by the rerun.
        summary.interrupted = True
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        bar.close()
        writer.close()
        summary.elapsed_seconds = monotonic() - started
    return summary


# ---------------------------------------------------------------- reading the outputs back


@dataclass
class VerdictFile:
    """A granular output read back: the last verdict per event id, and what was skipped."""

    verdicts: list[Verdict]
    bad_lines: list[tuple[int, str]]
    superseded: int  # earlier verdicts of an event id that appears again later


def read_verdicts(path: Path) -> VerdictFile:
    """Read a granular file written by ``run_batch``. Raises OSError if it cannot be read."""
    by_id: dict[str, Verdict] = {}
    bad: list[tuple[int, str]] = []
    superseded = 0
    for number, raw in _lines(path):
        try:
            verdict = Verdict.model_validate_json(raw)
        except ValidationError as exc:
            bad.append((number, "; ".join(validation_error_lines(exc, 1))))
            continue
        if verdict.event_id in by_id:
            # A resume under a new judge configuration appends; the newest verdict wins.
            superseded += 1
            del by_id[verdict.event_id]
        by_id[verdict.event_id] = verdict
    return VerdictFile(list(by_id.values()), bad, superseded)
