"""The files ``casewatch judge`` writes and reads back: the granular file (one ``Verdict`` per
line with raw judge output, attempts, tokens, cost, latency) and the compact file (case,
answer, context ids, S_final, bands), the Case-Aware paper's A.2.

``VerdictFiles`` is the batch's store, for the pipeline's look-up and store steps: ``existing``
answers from the verdicts the granular file held when the run started (same judge
configuration: a rerun into the same --out resumes), and ``save_batch`` appends. The store
step writes each verdict as soon as the loop collects it from the judge step, so a crash loses
at most the turns in flight; a line a crash cut short is dropped before appending.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NamedTuple

import structlog
from pydantic import ValidationError

from monitor.errors import validation_error_lines
from monitor.schema.turn import TurnEvent, Verdict

log = structlog.get_logger(__name__)


def default_rejects_path(out_path: Path) -> Path:
    return out_path.with_suffix(".rejects.jsonl")


def lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of ``path`` with their numbers (from 1)."""
    # Binary mode: a bad UTF-8 byte must reject one line, not abort the whole file.
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            stripped = raw.strip()
            if stripped:
                yield number, stripped


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


class Appended(NamedTuple):
    """What ``save_batch`` did (the store step's ``SavedBatch``): a file refuses no row."""

    inserted: int
    refused: tuple[()] = ()


class VerdictFiles:
    """The granular (and compact) output of a run, appended to by the store step on the run's
    own thread (``casewatch judge`` has no write-through: judge threads never write here).

    ``on_written`` is called with each verdict once its lines are written, so what it counts is
    what the file holds.
    """

    def __init__(
        self,
        out: Path,
        compact: Path | None,
        config_hash: str,
        on_written: Callable[[Verdict], None] = lambda verdict: None,
    ) -> None:
        self._config_hash = config_hash
        self._existing = existing_verdicts(out, config_hash)
        self._found: set[str] = set()  # event ids the look-up found in the file
        self._on_written = on_written
        _drop_partial_last_line(out)
        self._out: IO[str] = out.open("a", encoding="utf-8")
        self._compact: IO[str] | None = None
        try:
            if compact is not None:
                _drop_partial_last_line(compact)
                self._compact = compact.open("a", encoding="utf-8")
        except BaseException:
            self._out.close()
            raise

    def __contains__(self, event_id: object) -> bool:
        """Whether the granular file held a verdict of ``event_id`` when the run started."""
        return event_id in self._existing

    # ``JudgedLookup``: the look-up step's question.
    def existing(self, event_ids: Iterable[str], judge_config_hash: str) -> set[str]:
        if judge_config_hash != self._config_hash:
            return set()
        found = {e for e in event_ids if e in self._existing}
        self._found |= found
        return found

    def resumed(self) -> list[Verdict]:
        """The verdicts of the file the look-up found for this run's turns (each event once)."""
        return [v for e in self._found if (v := self._existing[e]) is not None]

    # ``VerdictWriter``: the store step's write.
    def save_batch(self, items: Sequence[tuple[TurnEvent, Verdict]]) -> Appended:
        granular = "".join(verdict.model_dump_json() + "\n" for _, verdict in items)
        compact = None
        if self._compact is not None:
            compact = "".join(
                json.dumps(verdict.compact(turn), ensure_ascii=False) + "\n"
                for turn, verdict in items
            )
        # Compact first: a granular line (what resume trusts) implies its compact line.
        if self._compact is not None and compact is not None:
            _put(self._compact, compact)
        _put(self._out, granular)
        for _, verdict in items:
            self._on_written(verdict)
        return Appended(len(items))

    def close(self) -> None:
        self._out.close()
        if self._compact is not None:
            self._compact.close()


def _put(f: IO[str], lines: str) -> None:
    f.write(lines)
    f.flush()


# ---------------------------------------------------------------- reading the outputs back


@dataclass
class VerdictFile:
    """A granular output read back: the last verdict per event id, and what was skipped."""

    verdicts: list[Verdict]
    bad_lines: list[tuple[int, str]]
    superseded: int  # earlier verdicts of an event id that appears again later


def read_verdicts(path: Path) -> VerdictFile:
    """Read a granular file written by ``casewatch judge``. Raises OSError if it cannot be
    read."""
    by_id: dict[str, Verdict] = {}
    bad: list[tuple[int, str]] = []
    superseded = 0
    for number, raw in lines(path):
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
