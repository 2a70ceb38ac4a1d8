"""The daemon's processing chain, wired: decode → sample → judge → store → commit.

``build_pipeline`` is the only place that knows the concrete steps and their order; the
daemon's loop sees a ``Pipeline``: submit, poll, join, close, plus the few questions the loop
and its rebalance handling ask (is the store healthy, how many turns of these partitions are
still being judged, commit now).
"""

from __future__ import annotations

from collections.abc import Collection

from consumers.dlq import DeadLetterSink
from consumers.offsets import OffsetTracker
from consumers.records import RawMessage, TopicPartition
from consumers.sampling import Sampler
from consumers.source import TurnSource
from monitor.clock import Clock
from monitor.errors import TransportError
from monitor.exporter import Metrics
from monitor.judging.evaluator import Evaluator
from monitor.judging.heuristic.tripwire import identifier_tripwire
from monitor.settings import Settings
from monitor.storage.store import Store
from monitor.stream.steps.base import Envelope, ProcessingStep
from monitor.stream.steps.commit import CommitStep
from monitor.stream.steps.decode import DEFAULT_FLUSH_TIMEOUT_S, DecodeStep
from monitor.stream.steps.judge import JudgeStep
from monitor.stream.steps.sample import SampleStep
from monitor.stream.steps.screen import ScreenStep
from monitor.stream.steps.store import StoreStep

# Screening a batch takes milliseconds; a revoke waits at most this long for those in flight.
SCREEN_FINISH_S = 5.0


class Pipeline:
    """The wired steps behind one interface (see ``monitor.stream.steps.base``)."""

    def __init__(
        self,
        first: ProcessingStep[RawMessage],
        judge: JudgeStep,
        store: StoreStep,
        commit: CommitStep,
        *,
        screen: ScreenStep | None = None,
    ) -> None:
        self._first = first
        self._screen = screen
        self._judge = judge
        self._store = store
        self._commit = commit

    # The step interface, forwarded to the head of the chain.
    def submit(self, message: Envelope[RawMessage]) -> None:
        self._first.submit(message)

    def poll(self) -> None:
        self._first.poll()

    def join(self, timeout: float | None) -> None:
        self._first.join(timeout)

    def close(self) -> None:
        self._first.close()

    # What the loop asks of it.
    @property
    def healthy(self) -> bool:
        """False while verdict writes (or look-ups of existing verdicts) fail (for /readyz)."""
        return self._store.healthy and self._judge.healthy

    @property
    def calls_running(self) -> int:
        return self._judge.calls_running

    def judging_in(self, tps: Collection[TopicPartition]) -> int:
        """Judge calls under way for these partitions (paid for whoever stores the verdict)."""
        return self._judge.running_in(tps)

    def hold(self, tps: Collection[TopicPartition]) -> None:
        """Revoked: do not start judging these partitions' queued turns until ``release``."""
        if self._screen is not None:  # nothing stays in flight in the screening processes
            self._screen.finish(SCREEN_FINISH_S)
        self._judge.hold(tps)

    def release(self, owned: Collection[TopicPartition]) -> None:
        self._judge.release(owned)

    def discard(self, tps: Collection[TopicPartition]) -> None:
        if self._screen is not None:
            self._screen.discard(tps)
        self._judge.discard(tps)

    def wait_progress(self, timeout: float) -> bool:
        """Block until a screening batch or a judge call finishes (or ``timeout``): something
        may then move on. False at once when nothing is running to wait for."""
        if self._screen is not None and self._screen.screening:
            self._screen.wait_any(timeout)
            return True
        # Not ``calls_running``: that asks every future in flight, on every turn of the loop.
        return self._judge.wait_any(timeout)

    def commit(self) -> bool:
        return self._commit.commit()

    def stop_periodic_commits(self) -> None:
        self._commit.stop_periodic()

    @property
    def final_commit_error(self) -> TransportError | None:
        return self._commit.final_error


def build_pipeline(
    settings: Settings,
    source: TurnSource,
    dlq: DeadLetterSink,
    store: Store,
    evaluator: Evaluator,
    metrics: Metrics,
    tracker: OffsetTracker,
    sampler: Sampler,
    clock: Clock,
) -> Pipeline:
    cfg = settings.daemon
    commit = CommitStep(source, tracker, metrics, clock, cfg.commit_interval_seconds)
    store_step = StoreStep(commit, store, metrics, clock)
    judge = JudgeStep(
        store_step,
        evaluator,
        metrics,
        sampler,
        concurrency=cfg.concurrency,
        max_in_flight=cfg.max_in_flight,
        clock=clock,
        judged=store,  # a replayed turn costs a database read, not a judge call
        done=commit,
        # Write-through (issue 24): stored by the judge thread as soon as it is judged.
        persist=lambda turn, verdict: store.save_many([(turn, verdict)]),
    )
    sample = SampleStep(
        judge,
        commit,
        sampler,
        metrics,
        tripwire=identifier_tripwire if settings.sampling.identifier_tripwire else None,
    )
    first = DecodeStep(
        sample,
        commit,
        dlq,
        metrics,
        settings.kafka.max_message_bytes,
        # A flush in progress when a stop comes must fit in the drain budget too.
        flush_timeout_s=min(DEFAULT_FLUSH_TIMEOUT_S, cfg.drain_timeout_seconds),
        clock=clock,
    )
    if cfg.screen_processes == 0:
        return Pipeline(first, judge, store_step, commit)
    screen = ScreenStep(
        first,
        commit,
        metrics,
        processes=cfg.screen_processes,
        max_bytes=settings.kafka.max_message_bytes,
        sampling=settings.sampling,
        clock=clock,
    )
    return Pipeline(screen, judge, store_step, commit, screen=screen)
