"""The streaming daemon: source → [assemble →] [screen →] decode → [redact →] sample → look-up →
judge → store → [export →] commit.

One thread runs the loop (the Kafka consumer is not thread-safe): poll the source, offer each
record to the first step, poll the steps. Backpressure follows arroyo's processor: a step that
is full raises MessageRejected and the loop keeps the records it could not hand over (at most
one poll's worth) and stops polling. A backlog that does not clear within ``PAUSE_AFTER_S``
means the pipeline is saturated, not just busy: every assigned partition is then paused and
polling resumes (it returns nothing, but keeps the consumer in its group) until the backlog is
handed over; then the partitions resume. Pausing only after a delay matters: a resumed
partition costs a fetch round trip, so pausing at every full poll would throttle throughput.
Memory is bounded by what each step may hold: ``max_in_flight`` turns in the look-up step and
as many in the judge step, the store batch, with screening ``4 × processes`` batches (each at
most 1,024 records and 1 MiB), with OTLP topics the assembler's caps in traces and spans, and
two polls' worth of records.

Offsets are tracked when read and marked done by the last step; only offsets below which
everything is finished are committed. What a rebalance or a rewinding source changes (finish the
revoked partitions' calls, forget what went elsewhere) is ``rebalances.py``'s.

While it waits the loop sleeps: a Kafka poll waits for records (``POLL_TIMEOUT_S``); a source
that has run out (a file read to its end without ``--follow``) is not polled again, and the loop
blocks until a judge call (or a screening batch) finishes, at most ``IDLE_WAIT_S`` for what
runs on time (the heartbeat, traces finished by their idle timeout, a store retry, the summary
line, a stop request). Polling such a source again at once would spin a core for as long as
the judge takes.

``stop()`` (SIGTERM) ends reading; ``run`` then drains in-flight work within
``drain_timeout_seconds``, commits, and returns. While it drains, every partition is paused and
the source is still polled (``drain.py``): a Kafka consumer that stops polling for longer than
``max_poll_interval_ms`` leaves its group, and its final commit would be refused.

Shutdown is bounded whatever the broker does. The drain budget counts from the stop request,
so a broker call in progress then (each has a limit, which the runner keeps within the drain
timeout) uses it up rather than adding to it. After a stop request the loop reads no more
records, periodic commits end, the drain's polls of the paused source end with the drain, and
the final commit gets the rest of the budget but at least ``FINAL_COMMIT_MIN_S``. If it fails,
``final_commit_error`` says why: nothing is lost (the tail is re-read after a restart and the
store deduplicates it), but the caller should say so.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import structlog

from consumers.decode import DLQ_REASONS
from consumers.group_health import RejoinsStuckGroup
from consumers.offsets import OffsetTracker
from consumers.otel.assembly import CAUSES as TRACE_CAUSES
from consumers.otel.genai import SKIP_REASONS
from consumers.otel.otlp import OTLP_DLQ_REASONS
from consumers.patch_fallbacks import ReportsPatchFallbacks
from consumers.records import RawMessage, TopicPartition
from consumers.source import TurnSource
from consumers.unreadable import ReportsUnreadable, UnreadableBatch
from monitor.config.daemon import DaemonConfig
from monitor.config.kafka import KafkaConfig
from monitor.config.sampling import SamplingConfig
from monitor.errors import MessageRejected, TransportError
from monitor.runtime.clock import Backoff, Clock, Deadline, RetryState
from monitor.sampling.sampler import SampleDecision
from monitor.schema.mapping import MAPPED_DLQ_REASONS
from monitor.storage.store import Store
from monitor.stream.drain import Drain
from monitor.stream.http import Heartbeat
from monitor.stream.pipeline import Pipeline
from monitor.stream.readiness import Readiness
from monitor.stream.rebalances import Rebalances
from monitor.stream.recorder import StreamRecorder
from monitor.stream.run_summary import RunSummary
from monitor.stream.steps.assemble import UNKNOWN_ASSISTANT
from monitor.stream.steps.base import Envelope
from monitor.stream.steps.store import UNSTORABLE

if TYPE_CHECKING:
    # The OTLP exporter (opentelemetry's SDK, requests) is ~6 MB resident: imported only when
    # otel_export is configured (monitor.stream.runner), never by a daemon that does not send.
    from monitor.otel_export.sender import EvaluationSender

log = structlog.get_logger(__name__)

POLL_TIMEOUT_S = 0.2  # also the longest a finished verdict waits to be collected
BACKLOG_WAIT_S = 0.02  # between offers of a rejected record
PAUSE_AFTER_S = 1.0  # a backlog older than this pauses the partitions
LAG_INTERVAL_S = 1.0  # the source caches lag; this only bounds gauge churn
HEARTBEAT_MAX_AGE_S = 60.0
# The longest the loop sleeps on a source that has run out while the pipeline still holds turns:
# what runs on time (the heartbeat, an OTLP trace's idle timeout, a store retry, the summary
# line, noticing a stop request) runs at least this often. A finished judge call wakes it
# sooner, and so does a stop request while no call runs.
IDLE_WAIT_S = 0.2


@runtime_checkable
class Exhaustible(Protocol):
    """A source that can run out (``consumers.file_source.FileTurnSource`` without follow):
    once ``exhausted``, polling it again can only return nothing."""

    @property
    def exhausted(self) -> bool: ...


class Daemon:
    """Runs the pipeline on the calling thread until ``stop()``; safe to run in a thread.

    It owns the pipeline and the evaluation sender (``evaluation_sender``, when verdicts are
    exported) it is given, built around its ``recorder``, ``tracker`` and ``clock``
    (``monitor.stream.runner.stream_daemon``), and closes them when ``run`` has drained the
    pipeline (``close`` if it never runs). The source and the store (for /readyz), and what
    the pipeline was built over, are closed by whoever opened them, after ``run`` returned.
    """

    def __init__(
        self,
        config: DaemonConfig,
        kafka: KafkaConfig,
        source: TurnSource,
        store: Store,
        pipeline: Pipeline,
        recorder: StreamRecorder,
        tracker: OffsetTracker,
        clock: Clock,
        *,
        evaluation_sender: EvaluationSender | None = None,
        heartbeat: Heartbeat | None = None,
        exit_when_idle: bool = False,
        sampling: SamplingConfig | None = None,
        dead_letters_to: str | None = None,
        rerun: str | None = None,
    ) -> None:
        self._clock = clock
        # A failed poll is tried again a second later (the stop event cuts the wait short).
        self._poll_retry = RetryState(Backoff(1.0, 1.0), self._clock)
        self._source = source
        self._finite = source if isinstance(source, Exhaustible) else None
        self._metrics = recorder
        self._cfg = config
        self._max_poll_records = kafka.max_poll_records
        self._exit_when_idle = exit_when_idle
        self.heartbeat = heartbeat or Heartbeat(HEARTBEAT_MAX_AGE_S, self._clock)
        self.tracker = tracker
        # What the run did, logged every interval and as it ends (``sampling``: to name the
        # setting when sampling or the budget skipped every turn; ``rerun``: how to read the
        # same input again then).
        self._summary = RunSummary(
            recorder.tally,
            clock,
            config.summary_interval_seconds,
            sampling=sampling,
            dead_letters_to=dead_letters_to,
            rerun=rerun,
            in_progress=tracker.pending_count,
        )
        self._sender = evaluation_sender
        self._pipeline = pipeline
        self._metrics.prime(dead_letter_reasons=(*DLQ_REASONS, UNSTORABLE))
        if any(f.startswith("otlp") for f in kafka.topic_formats.values()):
            self._metrics.prime(dead_letter_reasons=OTLP_DLQ_REASONS)
            self._metrics.prime_traces(TRACE_CAUSES)
            for reason in SKIP_REASONS:
                self._metrics.record_sampling(UNKNOWN_ASSISTANT, SampleDecision(False, reason), 0)
        if "mapped" in kafka.topic_formats.values():
            self._metrics.prime(dead_letter_reasons=MAPPED_DLQ_REASONS)

        self._backlog: deque[Envelope[RawMessage]] = deque()
        self._stop = threading.Event()
        self._stop_at: float | None = None  # when stop() was first called (monotonic)
        self._finished = threading.Event()
        self._ran = False  # run() closes what the daemon owns; close() does if it never ran
        # A source that can meet unreadable batches (Kafka) reports each failed read.
        stuck = None
        if isinstance(source, ReportsUnreadable):
            source.set_unreadable_listener(self._on_unreadable)
            stuck = source.unreadable
        if isinstance(source, RejoinsStuckGroup):
            source.set_rejoin_listener(self._metrics.record_group_rejoin)
        self._readiness = Readiness(
            source, store, lambda: self._pipeline.healthy, self._clock, stuck=stuck
        )
        self._next_lag = 0.0
        self._backlog_since: float | None = None
        self._first_records = True  # logs the first records read: a restart's milestone
        # Polling stops while a backlog waits, so pausing must come before the consumer's
        # max.poll.interval would expel it from the group.
        self._pause_after = min(PAUSE_AFTER_S, kafka.max_poll_interval_ms / 4000)
        self._rebalances = Rebalances(
            source,
            pipeline,
            tracker,
            self._backlog,
            recorder,
            self._clock,
            # Waiting on a revoke happens inside poll(): it must end well before
            # max.poll.interval.
            revoke_wait_s=min(config.revoke_timeout_seconds, kafka.max_poll_interval_ms / 4000),
            stopping=self._stop.is_set,
        )
        source.set_rebalance_listener(self._rebalances.assigned, self._rebalances.revoked)
        # Liveness: a poll may block in a group join for up to the join timeout.
        self._poll_block_s = kafka.join_timeout_ms / 1000 + POLL_TIMEOUT_S

    # ------------------------------------------------------------------ control

    def stop(self) -> None:
        """Ask ``run`` to stop reading and drain. Safe from a signal handler or another thread."""
        if self._stop_at is None:
            self._stop_at = self._clock.monotonic()
        self._pipeline.stop_periodic_commits()
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wait_finished(self, timeout: float | None = None) -> bool:
        return self._finished.wait(timeout)

    @property
    def abandoned_calls(self) -> int:
        """Judge calls still running after ``run`` returned (the drain timed out on them):
        their turns are uncommitted, so whoever owns the process need not wait for them."""
        return self._pipeline.calls_running if self._finished.is_set() else 0

    @property
    def final_commit_error(self) -> TransportError | None:
        """Why the commit at the end of ``run`` failed; None if it succeeded (or is to come)."""
        return self._pipeline.final_commit_error

    def readiness_details(self) -> dict[str, list[str]]:
        """Added to the /readyz body: which partitions are stuck on an unreadable batch."""
        return self._readiness.details()

    def checks(self) -> dict[str, Callable[[], bool]]:
        """Readiness checks for /readyz. Values cached by the loop: the consumer is not
        thread-safe, and a scrape must not wait on a database connect timeout."""
        return self._readiness.checks()

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        self._ran = True
        log.info(
            "daemon started",
            concurrency=self._cfg.concurrency,
            max_in_flight=self._cfg.max_in_flight,
        )
        try:
            while not self._stop.is_set():
                if self._tick():
                    log.info("source exhausted and all work finished; stopping")
                    break
        finally:
            # Over: a revocation from now on (the source closing) only commits, the pipeline
            # being drained and closed.
            self._stop.set()
            try:
                self._drain()
            finally:
                self._summary.finish()
                self._finished.set()

    def _tick(self) -> bool:
        """One loop iteration; True when idle and ``exit_when_idle``."""
        self.heartbeat.tick()
        self._offer_backlog()
        records: list[RawMessage] = []
        exhausted = self._finite is not None and self._finite.exhausted
        if (
            (not self._backlog or self._source.paused())
            and not exhausted
            and not self._stop.is_set()
        ):
            records = self._poll()
            self._offer_backlog()
        if self._stop.is_set():
            return False  # no further broker call: the drain has the rest of the budget
        self._pipeline.poll()
        self._apply_backpressure()
        self._update_status()
        self._summary.tick()
        if self._backlog:
            # Offered again as soon as the pipeline makes progress (a judge call or a
            # screening batch finishes), at the latest after BACKLOG_WAIT_S.
            if not self._pipeline.wait_progress(BACKLOG_WAIT_S):
                self._stop.wait(BACKLOG_WAIT_S)  # nothing running to wait for (e.g. a DB retry)
            return False
        if self._exit_when_idle and not records and self.tracker.pending_count() == 0:
            return True
        if exhausted:
            self._wait_for_work()
        return False

    def _wait_for_work(self) -> None:
        """Nothing more to read: sleep until the pipeline moves (a judge call or a screening
        batch finishes), at most ``IDLE_WAIT_S``; with nothing running in the background (a
        store retry, traces waiting for their idle timeout) until a stop request or
        ``IDLE_WAIT_S``."""
        if not self._pipeline.wait_progress(IDLE_WAIT_S):
            self._stop.wait(IDLE_WAIT_S)

    def _poll(self) -> list[RawMessage]:
        timeout = BACKLOG_WAIT_S if self._backlog else POLL_TIMEOUT_S
        try:
            with self.heartbeat.excused(self._poll_block_s):
                records = self._source.poll(timeout, self._max_poll_records)
        except TransportError as exc:
            self._readiness.broker_failed()
            delay = self._poll_retry.failed()
            log.warning(
                "polling the broker failed; retrying",
                error=str(exc),
                failures=self._poll_retry.failures,
            )
            self._stop.wait(delay)
            return []
        self._poll_retry.succeeded()
        self._rebalances.after_poll()
        if records and self._first_records:
            self._first_records = False
            log.info("first records polled", n=len(records))
        counts: dict[str, int] = {}
        # Runs once per record: names bound locally, and records come in runs per partition,
        # so the TopicPartition (and the rewind check's look-up) is redone only when it changes.
        track, append = self.tracker.track, self._backlog.append
        tp: TopicPartition | None = None
        expected = -1
        for msg in records:
            offset = msg.offset
            if tp is None or msg.partition != tp.partition or msg.topic != tp.topic:
                tp = TopicPartition(msg.topic, msg.partition)
                expected = self.tracker.next_offset(tp)
            if offset < expected:
                self._rebalances.rewound(tp, offset)
            expected = offset + 1
            track(tp, offset)
            counts[msg.topic] = counts.get(msg.topic, 0) + 1
            append(Envelope(tp, offset, msg))
        for topic, n in counts.items():
            self._metrics.record_consumed(topic, n)
        return records

    def _offer_backlog(self) -> None:
        # Each offer may write to the dead-letter topic; a stop request ends the offering.
        backlog, submit, stopping = self._backlog, self._pipeline.submit, self._stop.is_set
        while backlog and not stopping():
            try:
                submit(backlog[0])
            except MessageRejected:
                return
            backlog.popleft()
        if not self._backlog:
            self._backlog_since = None  # cleared: a busy pipeline, not a saturated one

    def _apply_backpressure(self) -> None:
        """Pause every assigned partition once a backlog is stuck; resume when it is gone."""
        paused = self._source.paused()
        if self._backlog:
            now = self._clock.monotonic()
            if self._backlog_since is None:
                self._backlog_since = now
            to_pause = self._source.assignment() - paused
            if to_pause and now - self._backlog_since >= self._pause_after:
                self._source.pause(to_pause)
                log.info("backpressure: partitions paused", n=len(to_pause) + len(paused))
        elif paused:
            self._source.resume(paused)
            log.info("backpressure released: partitions resumed", n=len(paused))
        self._metrics.set_paused_partitions(len(self._source.paused()))
        self._metrics.set_in_flight(self.tracker.pending_count())

    def _update_status(self) -> None:
        now = self._clock.monotonic()
        if now >= self._next_lag:
            self._next_lag = now + LAG_INTERVAL_S
            self._metrics.set_lag(self._source.lag().items())
            if isinstance(self._source, ReportsPatchFallbacks):  # a patch may fall back late
                self._metrics.set_kafka_patch_fallbacks(self._source.patch_fallbacks())
        self._readiness.update()

    # ------------------------------------------------------------------ source events

    def _on_unreadable(self, batch: UnreadableBatch) -> None:
        self._metrics.record_unreadable(batch.topic, batch.reason)

    # ------------------------------------------------------------------ shutdown

    def _drain(self) -> None:
        self._pipeline.stop_periodic_commits()
        budget = self._cfg.drain_timeout_seconds
        if self._stop_at is not None:
            budget -= self._clock.monotonic() - self._stop_at
        deadline = Deadline(max(0.0, budget), self._clock)
        # Records never handed to the pipeline are simply not committed: re-read on restart.
        unstarted = len(self._backlog)
        self._backlog.clear()
        log.info(
            "draining",
            in_flight=self.tracker.pending_count() - unstarted,
            left_for_next_run=unstarted,
            timeout_s=round(deadline.remaining() or 0.0, 1),
        )
        drain = Drain(
            self._source,
            self._pipeline,
            self._clock,
            self.heartbeat,
            after_poll=self._rebalances.after_poll,
            poll_block_s=self._poll_block_s,
            max_records=self._max_poll_records,
        )
        self._rebalances.drain_deadline = deadline
        try:
            try:
                drain.finish(deadline)
            finally:
                self._rebalances.drain_deadline = None
                self._pipeline.join(deadline.remaining())
        finally:
            self._pipeline.close()
            # What the export step queued goes out within what is left of the drain budget.
            self._close_sender(deadline.remaining() or 0.0)
        self._metrics.set_in_flight(self.tracker.pending_count())
        # A revoke during the drain forgets its partitions' unstarted records too.
        log.info(
            "drained",
            unfinished=max(0, self.tracker.pending_count() - unstarted),
            read_while_draining=drain.left_unread,
        )

    def _close_sender(self, timeout_s: float) -> None:
        sender, self._sender = self._sender, None
        if sender is not None:
            try:
                sender.close(timeout_s)
            except Exception:
                log.warning("closing failed", component="evaluation export", exc_info=True)

    def close(self) -> None:
        """Close what the daemon owns if ``run`` did not (``run`` closes the pipeline and the
        evaluation sender as it returns): a daemon built and never run."""
        if not self._ran:
            self._pipeline.close()
        self._close_sender(0.0)
