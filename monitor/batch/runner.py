"""``run_batch``: judge every turn event of a JSONL file through the daemon's steps.

The file is read by the daemon's file source (``consumers.file_source``: a one-partition
topic whose offsets are line indexes) and each record goes through the chain
``monitor.stream.turn_steps.build_turn_steps`` builds: decode → [redact] → sample (``JudgeAll``)
→ look-up (the granular file) → judge → store (``VerdictFiles``), finishing in a commit step
over the source. The judge step's bounded pool gives the concurrency (judges are synchronous
and thread-safe) and, by refusing turns while ``2 × concurrency`` are held, the
backpressure; verdicts are written as the loop collects them. The store step does not write
through here: the files are written from the loop's one thread, as before the pipeline ran
the batch (judge threads writing each line themselves queued on the files' lock behind one
waiting for the GIL).

With ``redaction`` (the daemon's settings) each turn is pseudonymized as in the daemon; a turn
too large to redact is rejected (``redaction_too_large``), never judged raw.

A bad line never stops the run: it is reported on stderr with its line number and written to
the rejects file. A rerun with the same ``--out`` resumes: turns whose verdict (from the same
judge configuration) is already in the granular file are skipped.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from consumers.file_source import FILE_TP, FileTurnSource
from consumers.offsets import OffsetTracker
from consumers.records import RawMessage
from monitor.batch.judge_all import JudgeAll
from monitor.batch.recorder import BatchRecorder
from monitor.batch.rejects import RejectsFile
from monitor.batch.summary import BatchSummary
from monitor.batch.verdict_files import VerdictFiles, default_rejects_path
from monitor.errors import MessageRejected
from monitor.judging.evaluator import Evaluator
from monitor.redaction.config import RedactionConfig
from monitor.runtime.clock import SystemClock
from monitor.stream.steps.base import Envelope, ProcessingStep
from monitor.stream.steps.commit import CommitStep
from monitor.stream.steps.judge import JudgeStep
from monitor.stream.turn_steps import TurnStepsConfig, build_turn_steps

MAX_LINE_BYTES = 16 << 20  # a line this long is not a turn event; never parse it
PENDING_PER_WORKER = 2  # turns held per judge thread: keeps them busy, memory bounded
_READ_LINES = 256  # lines read from the file at a time
_WAIT_S = 0.05  # a refused turn is offered again once a judge call ends, or after this


def run_batch(
    input_path: Path,
    out_path: Path,
    compact_path: Path | None,
    evaluator: Evaluator,
    concurrency: int = 8,
    rejects_path: Path | None = None,
    progress: bool = False,
    *,
    redaction: RedactionConfig | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> BatchSummary:
    """Judge every turn of ``input_path``; see the module docstring for the contract.

    Raises ConfigError (cannot open) or TurnFileError (cannot read) for the input, OSError
    when an output cannot be written.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    summary = BatchSummary()
    started = monotonic()
    show = progress and sys.stderr.isatty()
    source = FileTurnSource(input_path)
    closers: list[Callable[[], None]] = [source.close]
    try:
        total = source.line_count() if show else None  # before opening the outputs: may raise
        files = VerdictFiles(out_path, compact_path, evaluator.config_hash, summary.add)
        closers.append(files.close)
        rejects = RejectsFile(rejects_path or default_rejects_path(out_path))
        closers.append(rejects.close)
        bar = tqdm(total=total, disable=not show, unit="turn", file=sys.stderr, dynamic_ncols=True)
        closers.append(bar.close)
        recorder = BatchRecorder(summary, bar)
        clock = SystemClock()
        tracker = OffsetTracker()
        # Offsets of a file without an offsets file: kept in memory, to know what is finished.
        commit = CommitStep(source, tracker, recorder, clock, interval_s=1.0)
        config = TurnStepsConfig(
            concurrency=concurrency,
            max_in_flight=PENDING_PER_WORKER * concurrency,
            max_bytes=MAX_LINE_BYTES,
            flush_timeout_s=1.0,
            # Judges see placeholders here as in the daemon.
            redaction=redaction or RedactionConfig(enabled=False),
            identifier_tripwire=False,  # every turn is judged: nothing for it to select
            dead_letter_unredactable=True,
            write_through=False,
        )
        steps = build_turn_steps(
            config,
            commit,
            rejects,
            files,
            evaluator,
            recorder,
            JudgeAll(files),
            clock,
        )
        closers.append(steps.first.close)
        try:
            _drive(source, steps.first, steps.judge, tracker, summary, clock)
        except KeyboardInterrupt:
            # Ctrl-C: keep what is written (a rerun resumes from it); turns in flight are
            # dropped and judged again by the rerun.
            summary.interrupted = True
    finally:
        # The steps first: the judge threads stop taking turns before the files close.
        for close in reversed(closers):
            close()
        summary.elapsed_seconds = monotonic() - started
    # Once the steps are closed nothing else adds to the summary: the resumed verdicts last.
    for verdict in files.resumed():
        summary.tally(verdict)
    return summary


def _drive(
    source: FileTurnSource,
    first: ProcessingStep[RawMessage],
    judge: JudgeStep,
    tracker: OffsetTracker,
    summary: BatchSummary,
    clock: SystemClock,
) -> None:
    """Offer every line to the first step, then finish what the steps hold. A full chain
    refuses a record (the look-up and the judge step hold ``max_in_flight`` turns each): it
    is offered again when a judge call ends."""
    while not source.exhausted:
        records = source.poll(0.0, _READ_LINES)
        for record in records:
            summary.read += 1
            tracker.track(FILE_TP, record.offset)
            message = Envelope(FILE_TP, record.offset, record)
            refused = False
            while True:
                try:
                    first.submit(message)
                    break
                except MessageRejected:
                    # Refused once: a poll moves the look-up's turns on to the judge step.
                    # Again: wait for a judge call to end (or a moment, when none runs).
                    if refused and not judge.wait_any(_WAIT_S):
                        clock.sleep(_WAIT_S)
                    refused = True
                    first.poll()
        first.poll()
    first.join(None)
