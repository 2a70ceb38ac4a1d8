"""Judging on a bounded thread pool: ``concurrency`` calls at once, ``max_in_flight`` held.

Judges are synchronous and thread-safe, so a thread pool gives concurrency without asyncio.
Finished verdicts are collected on the caller's thread in ``poll`` (metrics, budget, forwarding
all stay single-threaded) and may complete out of order: the offset tracker handles that.
When ``max_in_flight`` turns are held (running, queued, or finished but refused by the store
step), ``submit`` raises MessageRejected and the daemon pauses its partitions.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

import structlog

from monitor.clock import Deadline
from monitor.errors import MessageRejected
from monitor.evaluator import Evaluator
from monitor.exporter import Metrics
from monitor.models import TurnEvent, Verdict
from monitor.pipeline.base import Envelope, JudgedTurn, ProcessingStep
from monitor.verdicts import failed_verdict

log = structlog.get_logger(__name__)

_WAIT_SLICE_S = 0.1  # join re-checks the downstream step this often while waiting


class CostRecorder(Protocol):
    def record_cost(self, usd: float) -> None: ...


class JudgeStep:
    def __init__(
        self,
        next_step: ProcessingStep[JudgedTurn],
        evaluator: Evaluator,
        metrics: Metrics,
        budget: CostRecorder,
        concurrency: int,
        max_in_flight: int,
        weight_profile: str = "",
    ) -> None:
        if concurrency < 1 or max_in_flight < 1:
            raise ValueError("concurrency and max_in_flight must be >= 1")
        self._next = next_step
        self._evaluator = evaluator
        self._metrics = metrics
        self._budget = budget
        self._max = max_in_flight
        self._profile = weight_profile
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="judge")
        self._running: dict[Future[Verdict], Envelope[TurnEvent]] = {}
        self._ready: deque[Envelope[JudgedTurn]] = deque()

    @property
    def in_flight(self) -> int:
        return len(self._running) + len(self._ready)

    @property
    def calls_running(self) -> int:
        """Judge calls still running; after ``close``, abandoned ones finishing in their threads
        (which the interpreter would wait for at exit)."""
        return sum(1 for future in self._running if not future.done())

    def submit(self, message: Envelope[TurnEvent]) -> None:
        if self.in_flight >= self._max:
            raise MessageRejected(f"{self.in_flight} turns are being judged (max_in_flight)")
        future = self._pool.submit(self._evaluate, message.payload)
        self._running[future] = message

    def _evaluate(self, turn: TurnEvent) -> Verdict:
        try:
            return self._evaluator.evaluate(turn)
        except Exception:
            # Evaluators return failures as verdicts; reaching this is a bug. The turn is
            # still recorded (judge_failed/internal) rather than lost or retried forever.
            log.exception("evaluator raised", event_id=turn.event_id)
            return failed_verdict(
                turn,
                [],
                "internal",
                weight_profile=self._profile,
                judge_config_hash=self._evaluator.config_hash,
            )

    def _collect(self) -> None:
        for future in [f for f in self._running if f.done()]:
            message = self._running.pop(future)
            verdict = future.result()
            self._metrics.record_verdict(verdict)
            cost = sum(j.cost_usd for j in verdict.judgments)
            if cost:
                self._budget.record_cost(cost)
            self._ready.append(message.replace(JudgedTurn(message.payload, verdict)))

    def _forward(self) -> None:
        while self._ready:
            try:
                self._next.submit(self._ready[0])
            except MessageRejected:
                return  # keep it; offered again on the next poll
            self._ready.popleft()

    def poll(self) -> None:
        self._collect()
        self._forward()
        self._next.poll()

    def join(self, timeout: float | None = None) -> None:
        deadline = Deadline(timeout)
        while self._running or self._ready:
            remaining = deadline.remaining()
            if remaining is not None and remaining <= 0:
                log.warning("drain timed out; unfinished turns stay uncommitted", n=self.in_flight)
                break
            if self._running:
                wait = _WAIT_SLICE_S if remaining is None else min(_WAIT_SLICE_S, remaining)
                cf.wait(list(self._running), timeout=wait, return_when=cf.FIRST_COMPLETED)
            self.poll()
            if not self._running and self._ready:
                # Only the downstream step holds us up (e.g. a database retry backoff).
                time.sleep(_WAIT_SLICE_S if remaining is None else min(_WAIT_SLICE_S, remaining))
        self._next.join(deadline.remaining())

    def close(self) -> None:
        # Queued calls are cancelled; running ones finish in their threads (judge timeouts
        # bound them) and their results are dropped: those offsets were never committed.
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._next.close()
