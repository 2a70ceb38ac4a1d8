"""Judging on a bounded thread pool: ``concurrency`` calls at once, ``max_in_flight`` held.

Judges are synchronous and thread-safe, so a thread pool gives concurrency without asyncio.
Finished verdicts are collected on the caller's thread in ``poll`` (metrics, budget, forwarding
all stay single-threaded) and may complete out of order: the offset tracker handles that.
When ``max_in_flight`` turns are held (running, queued, or finished but refused by the store
step), ``submit`` raises MessageRejected and the daemon pauses its partitions.

Turns reach this step after the look-up of stored verdicts (``lookup.py``): a replay never pays
twice. Each verdict settles the reservation its turn's envelope carries with the judge requests
it really made (an arbiter's and retries included), on the judge thread as the call ends, so a
call abandoned at a stop settles too. A turn dropped before its call started (a revoke whose
partition went elsewhere, a rewind, the stop) releases its reservation.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Collection
from concurrent.futures import Future
from typing import Protocol

import structlog

from consumers.records import TopicPartition
from monitor.errors import MessageRejected
from monitor.judging.evaluator import Evaluator, evaluate_guarded
from monitor.runtime.clock import Clock, Deadline, SystemClock
from monitor.runtime.workers import DaemonThreadPool
from monitor.sampling.budget import Reservation
from monitor.schema.turn import TurnEvent, Verdict
from monitor.stream.steps.base import Envelope, JudgedTurn, ProcessingStep, forward, release_all

log = structlog.get_logger(__name__)

_WAIT_SLICE_S = 0.1  # join re-checks the downstream step this often while waiting
# While turns are queued behind busy judge threads, collecting a verdict at once gains nothing
# (the thread has already taken the next turn); collecting those finished within this window
# together makes one store batch and one look-up of them instead of one each (the daemon's
# loop was ~45 % of the GIL at 160 turns/s, most of it per tick: bench/README.md).
_BATCH_WINDOW_S = 0.02


class JudgeMetrics(Protocol):
    def record_verdict(self, verdict: Verdict) -> None: ...


class JudgeStep:
    """Implements ``ProcessingStep[TurnEvent]`` and ``Rebalancing``."""

    def __init__(
        self,
        next_step: ProcessingStep[JudgedTurn],
        evaluator: Evaluator,
        metrics: JudgeMetrics,
        concurrency: int,
        max_in_flight: int,
        clock: Clock | None = None,
        *,
        on_judged: Callable[[TurnEvent, Verdict], None] | None = None,
    ) -> None:
        if concurrency < 1 or max_in_flight < 1:
            raise ValueError("concurrency and max_in_flight must be >= 1")
        self._next = next_step
        self._evaluator = evaluator
        self._metrics = metrics
        self._max = max_in_flight
        self._clock = clock or SystemClock()
        self._pool = DaemonThreadPool(concurrency, "judge")
        # Run on the judge thread with each verdict before the thread takes the next turn (the
        # store step's write-through, ``StoreStep.write_now``). ``close`` detaches it and waits
        # for the calls under way: an abandoned call ending later writes nothing into a store
        # its owner has closed.
        self._on_judged = on_judged
        self._judged_calls = 0  # on_judged calls under way
        self._judged_idle = threading.Condition()
        self._running: dict[Future[Verdict], Envelope[TurnEvent]] = {}
        # Filled by the judge threads as calls end, so waiting and collecting cost the same
        # with 256 turns in flight as with one (no scan of every future, no waiter on each).
        self._finished: deque[Future[Verdict]] = deque()
        self._progress = threading.Event()
        self._ready: deque[Envelope[JudgedTurn]] = deque()
        # Turns of revoked partitions not yet started: judged only if the partition comes back.
        self._held: list[Envelope[TurnEvent]] = []

    @property
    def in_flight(self) -> int:
        return len(self._running) + len(self._ready) + len(self._held)

    @property
    def calls_running(self) -> int:
        """Judge calls still running; after ``close``, abandoned ones finishing in their threads
        (which the interpreter would wait for at exit)."""
        return sum(1 for future in self._running if not future.done())

    def submit(self, message: Envelope[TurnEvent]) -> None:
        if self.in_flight >= self._max:
            raise MessageRejected(f"{self.in_flight} turns are being judged (max_in_flight)")
        self._start(message)

    def _start(self, message: Envelope[TurnEvent]) -> None:
        future = self._pool.submit(self._judge, message.payload, message.reservation)
        self._running[future] = message
        future.add_done_callback(self._finish)

    def _judge(self, turn: TurnEvent, reservation: Reservation | None) -> Verdict:
        """On a judge thread: judge, settle the turn's reservation, then hand the verdict to
        ``on_judged``."""
        try:
            verdict = evaluate_guarded(self._evaluator, turn)
        except BaseException:
            if reservation is not None:
                reservation.keep()  # an evaluator bug: what it spent is unknown
            raise
        if reservation is not None:
            # The requests really made: an arbiter's (a third judge) and retries included.
            # No judgments (an evaluator bug): what it spent is unknown, the reservation stands.
            if verdict.judgments:
                requests = sum(j.attempts for j in verdict.judgments)
                cost = sum(j.cost_usd for j in verdict.judgments)
                reservation.settle(requests, cost)
            else:
                reservation.keep()
        with self._judged_idle:
            on_judged = self._on_judged
            if on_judged is None:
                return verdict
            self._judged_calls += 1
        try:
            on_judged(turn, verdict)
        finally:
            with self._judged_idle:
                self._judged_calls -= 1
                self._judged_idle.notify_all()
        return verdict

    def _finish(self, future: Future[Verdict]) -> None:
        # On the judge thread (or here, for a cancel): deque.append is atomic, no lock needed.
        self._finished.append(future)
        self._progress.set()

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
        return len(self._held)

    def release(self, owned: Collection[TopicPartition]) -> None:
        """After a rebalance: judge the held turns of partitions still ``owned``, drop the rest
        (their new owner reads them from the last commit)."""
        held, self._held = self._held, []
        for message in held:
            if message.tp in owned:
                self._start(message)
            elif message.reservation is not None:
                message.reservation.release()

    def discard(self, tps: Collection[TopicPartition]) -> None:
        """Drop queued and held turns of partitions this consumer re-reads or no longer owns."""
        release_all(m for m in self._held if m.tp in tps)
        self._held = [m for m in self._held if m.tp not in tps]
        for future, message in list(self._running.items()):
            if message.tp in tps and future.cancel():
                del self._running[future]
                if message.reservation is not None:
                    message.reservation.release()

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
            verdict = future.result()  # its reservation was settled on the judge thread
            self._metrics.record_verdict(verdict)
            self._ready.append(message.replace(JudgedTurn(message.payload, verdict)))

    def poll(self) -> None:
        self._collect()
        forward(self._ready, self._next)
        self._next.poll()

    def join(self, timeout: float | None = None) -> None:
        deadline = Deadline(timeout, self._clock)
        while self._running or self._ready:
            remaining = deadline.remaining()
            if remaining is not None and remaining <= 0:
                log.warning("drain timed out; unfinished turns stay uncommitted", n=self.in_flight)
                break
            if self._running:
                wait = _WAIT_SLICE_S if remaining is None else min(_WAIT_SLICE_S, remaining)
                self._progress.wait(wait)
            self.poll()
            if not self._running and self._ready:
                # Only the next step holds us up (e.g. a store retry backoff).
                self._clock.sleep(
                    _WAIT_SLICE_S if remaining is None else min(_WAIT_SLICE_S, remaining)
                )
        self._next.join(deadline.remaining())

    def close(self) -> None:
        # Queued calls are cancelled; running ones finish in their daemon threads (judge
        # timeouts bound them; process exit does not wait for them) and their results are
        # dropped: those offsets were never committed. A cancelled call spent nothing; a
        # running one settles its reservation on its thread as it ends. Its verdict is not
        # written through: ``on_judged`` is detached first, once the writes under way ended.
        with self._judged_idle:
            self._on_judged = None
            self._judged_idle.wait_for(lambda: self._judged_calls == 0)
        self._pool.shutdown()
        release_all(m for f, m in self._running.items() if f.cancelled())
        release_all(self._held)
        self._next.close()
