"""What the pipeline's steps record, as the batch counts it: the run's summary and its
progress bar.

The daemon's ``StreamRecorder`` turns the same calls into Prometheus metrics. A batch run
reports a summary instead: rejected lines, duplicates, turns already in --out; the judged
verdicts are counted by ``VerdictFiles`` as it writes them (what the file holds is what the
summary says, also after Ctrl-C). Commits, redactions, the tripwire and storage retries are
daemon concerns the summary does not report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from monitor.batch.judge_all import DUPLICATE
from monitor.batch.summary import BatchSummary
from monitor.sampling.sampler import SampleDecision
from monitor.schema.turn import Verdict


class Progress(Protocol):
    """The progress bar's one call (``tqdm``)."""

    def update(self, n: float | None = 1) -> bool | None: ...


class BatchRecorder:
    """Implements the pipeline's ``TurnMetrics``; called on the loop's thread only."""

    def __init__(self, summary: BatchSummary, progress: Progress) -> None:
        self._summary = summary
        self._progress = progress

    def record_dead_letter(self, reason: str) -> None:
        self._summary.rejected += 1
        self._progress.update(1)

    def record_dead_letter_held(self, why: str) -> None:
        return None  # the rejects file is written before send returns: nothing is ever held

    def record_sampling(self, assistant: str, decision: SampleDecision, count: int = 1) -> None:
        if decision == DUPLICATE:  # a replayed event: judged once
            self._summary.duplicates += count
            self._progress.update(count)

    def record_already_judged(self, assistant: str, count: int = 1) -> None:
        self._summary.skipped_existing += count
        self._progress.update(count)

    def record_verdict(self, verdict: Verdict) -> None:
        self._progress.update(1)

    # Not in a batch run's summary.
    def record_tripwire(
        self,
        assistant: str,
        checked: int,
        mismatches: Iterable[tuple[str, int]] = (),
        truncated: int = 0,
    ) -> None:
        return None

    def record_redactions(self, counts: Mapping[str, int]) -> None:
        return None

    def record_cheap_look(self, assistant: str, cell: str, count: int) -> None:
        return None  # a batch run judges every turn: no cascade

    def prime_redactions(self, kinds: Iterable[str]) -> None:
        return None

    def record_stored(self, inserted: int, duplicate: int) -> None:
        return None  # counted by the files as they are written

    def record_storage_error(self) -> None:
        return None

    def record_commit(self, topics: Iterable[str]) -> None:
        return None

    def record_commit_failure(self) -> None:
        return None
