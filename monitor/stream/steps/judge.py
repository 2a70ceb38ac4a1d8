"""Judging on a bounded thread pool: ``concurrency`` calls at once, ``max_in_flight`` held.

Judges are synchronous and thread-safe, so a thread pool gives concurrency without asyncio.
Finished verdicts are collected on the caller's thread in ``poll`` (metrics, budget, forwarding
all stay single-threaded) and may complete out of order: the offset tracker handles that.
When ``max_in_flight`` turns are held (running, queued, or finished but refused by the store
step), ``submit`` raises MessageRejected and the daemon pauses its partitions.

A replay never pays twice: with a ``judged`` lookup (the store), submitted turns wait for the next
``poll``, which asks the store in one query which of them already have a verdict under the
evaluator's configuration hash. Those go straight to the ``done`` step (their offsets become
committable), are counted ``casewatch_turns_skipped_total{reason="already_judged"}`` and get back
the budget the sampler charged for them; only the rest are judged. A failing lookup is retried
with backoff (the turns wait, counted in flight): judging them blind could pay twice.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import Future
from typing import Protocol

import structlog

from consumers.records import TopicPartition
from monitor.clock import Backoff, Clock, Deadline, SystemClock
from monitor.errors import MessageRejected, StorageError
from monitor.judging.evaluator import Evaluator, evaluate_guarded
from monitor.models import TurnEvent, Verdict
from monitor.stream.steps.base import DoneStep, Envelope, JudgedTurn, ProcessingStep
from monitor.workers import DaemonThreadPool

log = structlog.get_logger(__name__)

_WAIT_SLICE_S = 0.1  # join re-checks the downstream step this often while waiting
# While turns are queued behind busy judge threads, collecting a verdict at once gains nothing
# (the thread has already taken the next turn); collecting those finished within this window
# together makes one store batch and one look-up of them instead of one each (the daemon's
# loop was ~45 % of the GIL at 160 turns/s, most of it per tick: bench/README.md).
_BATCH_WINDOW_S = 0.02
# Retries of a failed look-up of existing verdicts: a read is cheap, so they stay frequent.
LOOKUP_BACKOFF = Backoff(initial_s=0.5, max_s=5.0)


class CostRecorder(Protocol):
    """The hourly budget: charged with what each judged turn really cost, in dollars and in
    judge calls (an arbiter call is a third call the sampler could not know about)."""

    def record_cost(self, usd: float, calls: int | None = None) -> None: ...


class JudgeMetrics(Protocol):
    def record_verdict(self, verdict: Verdict) -> None: ...

    def record_already_judged(self, assistant: str, count: int = 1) -> None: ...

    def record_storage_error(self) -> None: ...


class JudgedLookup(Protocol):
    def existing(self, event_ids: Iterable[str], judge_config_hash: str) -> set[str]:
        """The subset of ``event_ids`` that already have a verdict under the hash."""
        ...


class JudgeStep:
    def __init__(
        self,
        next_step: ProcessingStep[JudgedTurn],
        evaluator: Evaluator,
        metrics: JudgeMetrics,
        budget: CostRecorder,
        concurrency: int,
        max_in_flight: int,
        clock: Clock | None = None,
        *,
        judged: JudgedLookup | None = None,
        done: DoneStep | None = None,
        backoff: Backoff | None = None,
        persist: Callable[[TurnEvent, Verdict], int] | None = None,
    ) -> None:
        if concurrency < 1 or max_in_flight < 1:
            raise ValueError("concurrency and max_in_flight must be >= 1")
        if (judged is None) != (done is None):
            raise ValueError("judged and done go together: skipped turns need a done step")
        self._next = next_step
        self._evaluator = evaluator
        self._metrics = metrics
        self._budget = budget
        self._max = max_in_flight
        self._clock = clock or SystemClock()
        self._pool = DaemonThreadPool(concurrency, "judge")
        # Issue 24: a judge thread stores its verdict before it takes the next turn, so a
        # finished verdict never waits in memory for the loop (a SIGKILL then costs the calls
        # in flight, at most ``concurrency``); a failed write leaves it to the store step,
        # which retries with backoff.
        self._persist = persist
        self._running: dict[Future[tuple[Verdict, int | None]], Envelope[TurnEvent]] = {}
        # Filled by the judge threads as calls end, so waiting and collecting cost the same
        # with 256 turns in flight as with one (no scan of every future, no waiter on each).
        self._finished: deque[Future[tuple[Verdict, int | None]]] = deque()
        self._progress = threading.Event()
        self._ready: deque[Envelope[JudgedTurn]] = deque()
        # Turns of revoked partitions not yet started: judged only if the partition comes back.
        self._held: list[Envelope[TurnEvent]] = []
        # Turns submitted since the last lookup of existing verdicts (with ``judged`` only).
        self._judged = judged
        self._done = done
        self._unchecked: list[Envelope[TurnEvent]] = []
        self._backoff = backoff or LOOKUP_BACKOFF
        self._lookup_failures = 0
        self._lookup_retry_at = 0.0

    @property
    def healthy(self) -> bool:
        """False from a failed look-up of existing verdicts until the next successful one."""
        return self._lookup_failures == 0

    @property
    def in_flight(self) -> int:
        return len(self._running) + len(self._ready) + len(self._held) + len(self._unchecked)

    @property
    def calls_running(self) -> int:
        """Judge calls still running; after ``close``, abandoned ones finishing in their threads
        (which the interpreter would wait for at exit)."""
        return sum(1 for future in self._running if not future.done())

    def submit(self, message: Envelope[TurnEvent]) -> None:
        if self.in_flight >= self._max:
            raise MessageRejected(f"{self.in_flight} turns are being judged (max_in_flight)")
        if self._judged is None:
            self._start(message)
        else:
            self._unchecked.append(message)  # looked up, in one batch, on the next poll

    def _start(self, message: Envelope[TurnEvent]) -> None:
        future = self._pool.submit(self._judge, message.payload)
        self._running[future] = message
        future.add_done_callback(self._finish)

    def _judge(self, turn: TurnEvent) -> tuple[Verdict, int | None]:
        """On a judge thread: judge, then store (write-through) when a writer is given."""
        verdict = evaluate_guarded(self._evaluator, turn)
        if self._persist is None:
            return verdict, None
        try:
            return verdict, self._persist(turn, verdict)
        except StorageError as exc:  # the store step retries it, with backoff and metrics
            log.debug("storing a verdict from the judge thread failed", error=str(exc))
            return verdict, None

    def _finish(self, future: Future[tuple[Verdict, int | None]]) -> None:
        # On the judge thread (or here, for a cancel): deque.append is atomic, no lock needed.
        self._finished.append(future)
        self._progress.set()

    def _check(self) -> None:
        """Judge the unchecked turns that have no verdict yet; finish the others."""
        if not self._unchecked or self._judged is None or self._done is None:
            return
        if self._lookup_failures and self._clock.monotonic() < self._lookup_retry_at:
            return
        batch = self._unchecked
        try:
            found = self._judged.existing(
                {m.payload.event_id for m in batch}, self._evaluator.config_hash
            )
        except StorageError as exc:
            self._lookup_failures += 1
            delay = self._backoff.delay(self._lookup_failures)
            self._lookup_retry_at = self._clock.monotonic() + delay
            self._metrics.record_storage_error()
            log.warning(
                "looking up existing verdicts failed; retrying",
                error=str(exc),
                failures=self._lookup_failures,
                retry_in_s=round(delay, 2),
                held=len(batch),
            )
            return
        self._unchecked = []
        self._lookup_failures = 0
        skipped: dict[str, int] = {}
        for message in batch:
            if message.payload.event_id in found:
                self._done.submit(message)
                name = message.payload.assistant.name
                skipped[name] = skipped.get(name, 0) + 1
                self._budget.record_cost(0.0, calls=0)  # charged when sampled, never spent
            else:
                self._start(message)
        for assistant, n in skipped.items():
            self._metrics.record_already_judged(assistant, n)

    def running_in(self, tps: Collection[TopicPartition]) -> int:
        """Judge calls under way for turns of these partitions (queued ones not counted)."""
        return sum(1 for f, m in self._running.items() if m.tp in tps and not f.done())

    def hold(self, tps: Collection[TopicPartition]) -> int:
        """Take back the queued, not yet started turns of these partitions (a revoke: they may
        move to another consumer, which would judge them too). Returns how many."""
        for future, message in list(self._running.items()):
            if message.tp in tps and future.cancel():
                del self._running[future]
                self._held.append(message)
        self._held.extend(m for m in self._unchecked if m.tp in tps)
        self._unchecked = [m for m in self._unchecked if m.tp not in tps]
        return len(self._held)

    def release(self, owned: Collection[TopicPartition]) -> None:
        """After a rebalance: judge the held turns of partitions still ``owned``, drop the rest
        (their new owner reads them from the last commit)."""
        held, self._held = self._held, []
        for message in held:
            if message.tp in owned:
                if self._judged is None:
                    self._start(message)
                else:  # checked again: it may have been judged elsewhere meanwhile
                    self._unchecked.append(message)

    def discard(self, tps: Collection[TopicPartition]) -> None:
        """Drop queued and held turns of partitions this consumer re-reads or no longer owns."""
        self._held = [m for m in self._held if m.tp not in tps]
        self._unchecked = [m for m in self._unchecked if m.tp not in tps]
        for future, message in list(self._running.items()):
            if message.tp in tps and future.cancel():
                del self._running[future]

    def wait_any(self, timeout: float) -> bool:
        """Block until a judge call finishes or ``timeout`` passes; while more turns wait for
        a judge thread, also for those finishing within ``_BATCH_WINDOW_S``. False at once when
        no call is in flight (finished ones not collected yet count: they return at once)."""
        if not self._running:
            return False
        deadline = Deadline(timeout, self._clock)
        if self._progress.wait(timeout) and self._pool.queued:
            self._clock.sleep(min(_BATCH_WINDOW_S, deadline.remaining() or 0.0))
        return True

    def _collect(self) -> None:
        # Cleared before draining: a call ending meanwhile sets it again for the next wait.
        self._progress.clear()
        while self._finished:
            future = self._finished.popleft()
            message = self._running.pop(future, None)
            if message is None:
                continue  # cancelled by hold or discard, which took the turn back
            verdict, stored = future.result()
            self._metrics.record_verdict(verdict)
            # Every judgment is one judge call: with a panel, the arbiter's is charged here.
            calls = len(verdict.judgments)
            cost = sum(j.cost_usd for j in verdict.judgments)
            if cost or calls:
                self._budget.record_cost(cost, calls=calls)
            self._ready.append(message.replace(JudgedTurn(message.payload, verdict, stored)))

    def _forward(self) -> None:
        while self._ready:
            try:
                self._next.submit(self._ready[0])
            except MessageRejected:
                return  # keep it; offered again on the next poll
            self._ready.popleft()

    def poll(self) -> None:
        self._check()
        self._collect()
        self._forward()
        self._next.poll()

    def join(self, timeout: float | None = None) -> None:
        deadline = Deadline(timeout, self._clock)
        while self._running or self._ready or self._unchecked:
            remaining = deadline.remaining()
            if remaining is not None and remaining <= 0:
                log.warning("drain timed out; unfinished turns stay uncommitted", n=self.in_flight)
                break
            if self._running:
                wait = _WAIT_SLICE_S if remaining is None else min(_WAIT_SLICE_S, remaining)
                self._progress.wait(wait)
            self.poll()
            if not self._running and (self._ready or self._unchecked):
                # Only the database holds us up (e.g. a retry backoff).
                self._clock.sleep(
                    _WAIT_SLICE_S if remaining is None else min(_WAIT_SLICE_S, remaining)
                )
        self._next.join(deadline.remaining())

    def close(self) -> None:
        # Queued calls are cancelled; running ones finish in their daemon threads (judge
        # timeouts bound them; process exit does not wait for them) and their results are
        # dropped: those offsets were never committed.
        self._pool.shutdown()
        self._next.close()
