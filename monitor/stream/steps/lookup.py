"""A replay never pays twice: turns already judged under this configuration skip the judge.

Submitted turns wait for the next ``poll``, which asks the store in one query which of them
already have a verdict under the evaluator's configuration hash. Those go straight to the
``done`` step (their offsets become committable), are counted
``casewatch_turns_skipped_total{reason="already_judged"}`` and release the reservation of the
hourly budget their envelope carries; only the rest go on to the judge step. A failing look-up
is retried with backoff (the turns wait, counted in flight, so intake pauses): judging them
blind could pay twice. Turns dropped here (a partition revoked and gone elsewhere, a rewind,
the stop) release their reservations too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable
from typing import Protocol

import structlog

from consumers.records import TopicPartition
from monitor.errors import MessageRejected, StorageError
from monitor.runtime.clock import Backoff, Clock, Deadline, RetryState, SystemClock
from monitor.schema.turn import TurnEvent
from monitor.stream.steps.base import DoneStep, Envelope, ProcessingStep, forward, release_all

log = structlog.get_logger(__name__)

_WAIT_SLICE_S = 0.1  # join re-checks the downstream step this often while waiting
# Retries of a failed look-up of existing verdicts: a read is cheap, so they stay frequent.
LOOKUP_BACKOFF = Backoff(initial_s=0.5, max_s=5.0)


class LookupMetrics(Protocol):
    def record_already_judged(self, assistant: str, count: int = 1) -> None: ...

    def record_storage_error(self) -> None: ...


class JudgedLookup(Protocol):
    def existing(self, event_ids: Iterable[str], judge_config_hash: str) -> set[str]:
        """The subset of ``event_ids`` that already have a verdict under the hash."""
        ...


class LookupStep:
    """Implements ``ProcessingStep[TurnEvent]`` and ``Rebalancing``."""

    def __init__(
        self,
        next_step: ProcessingStep[TurnEvent],
        done: DoneStep,
        judged: JudgedLookup,
        config_hash: str,
        metrics: LookupMetrics,
        max_in_flight: int,
        clock: Clock | None = None,
        *,
        backoff: Backoff | None = None,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self._next = next_step
        self._done = done
        self._judged = judged
        self._config_hash = config_hash
        self._metrics = metrics
        self._max = max_in_flight
        self._clock = clock or SystemClock()
        self._retry = RetryState(backoff or LOOKUP_BACKOFF, self._clock)
        self._unchecked: list[Envelope[TurnEvent]] = []  # looked up, in one batch, next poll
        self._ready: deque[Envelope[TurnEvent]] = deque()  # not judged yet: for the judge step
        # Turns of revoked partitions not looked up yet: looked up if the partition comes back.
        self._held: list[Envelope[TurnEvent]] = []

    @property
    def healthy(self) -> bool:
        """False from a failed look-up until the next successful one (for /readyz)."""
        return self._retry.healthy

    @property
    def in_flight(self) -> int:
        return len(self._unchecked) + len(self._ready) + len(self._held)

    def submit(self, message: Envelope[TurnEvent]) -> None:
        if self.in_flight >= self._max:
            raise MessageRejected(f"{self.in_flight} turns wait for a verdict look-up")
        self._unchecked.append(message)

    def _check(self) -> None:
        if not self._unchecked:
            return
        if not self._retry.due():
            return
        batch = self._unchecked
        try:
            found = self._judged.existing({m.payload.event_id for m in batch}, self._config_hash)
        except StorageError as exc:
            delay = self._retry.failed()
            self._metrics.record_storage_error()
            log.warning(
                "looking up existing verdicts failed; retrying",
                error=str(exc),
                failures=self._retry.failures,
                retry_in_s=round(delay, 2),
                held=len(batch),
            )
            return
        self._unchecked = []
        self._retry.succeeded()
        skipped: dict[str, int] = {}
        for message in batch:
            if message.payload.event_id in found:
                self._done.submit(message)
                name = message.payload.assistant.name
                skipped[name] = skipped.get(name, 0) + 1
                if message.reservation is not None:  # reserved when sampled, never spent
                    message.reservation.release()
            else:
                self._ready.append(message)
        for assistant, n in skipped.items():
            self._metrics.record_already_judged(assistant, n)

    def poll(self) -> None:
        self._check()
        forward(self._ready, self._next)
        self._next.poll()

    # ``Rebalancing``: every turn of a revoked partition not handed to the judge yet is held.
    def hold(self, tps: Collection[TopicPartition]) -> int:
        self._held.extend(m for m in self._unchecked if m.tp in tps)
        self._unchecked = [m for m in self._unchecked if m.tp not in tps]
        self._held.extend(m for m in self._ready if m.tp in tps)
        self._ready = deque(m for m in self._ready if m.tp not in tps)
        return len(self._held)

    def running_in(self, tps: Collection[TopicPartition]) -> int:
        return 0  # a look-up runs inside ``poll``: nothing is under way between calls

    def release(self, owned: Collection[TopicPartition]) -> None:
        held, self._held = self._held, []
        # Looked up again: the partition's other owner may have judged them meanwhile.
        self._unchecked.extend(m for m in held if m.tp in owned)
        release_all(m for m in held if m.tp not in owned)

    def discard(self, tps: Collection[TopicPartition]) -> None:
        release_all(m for m in self._held if m.tp in tps)
        release_all(m for m in self._unchecked if m.tp in tps)
        release_all(m for m in self._ready if m.tp in tps)
        self._held = [m for m in self._held if m.tp not in tps]
        self._unchecked = [m for m in self._unchecked if m.tp not in tps]
        self._ready = deque(m for m in self._ready if m.tp not in tps)

    def wait_any(self, timeout: float) -> bool:
        return False  # nothing runs in the background here

    def join(self, timeout: float | None = None) -> None:
        deadline = Deadline(timeout, self._clock)
        while self._unchecked or self._ready:
            remaining = deadline.remaining()
            if remaining is not None and remaining <= 0:
                log.warning("drain timed out; unchecked turns stay uncommitted", n=self.in_flight)
                break
            self.poll()
            if self._unchecked or self._ready:  # the database or the judge step holds us up
                self._clock.sleep(
                    _WAIT_SLICE_S if remaining is None else min(_WAIT_SLICE_S, remaining)
                )
        self._next.join(deadline.remaining())

    def close(self) -> None:
        # Abandoned (re-read after a restart): what they reserved was never spent.
        release_all((*self._unchecked, *self._ready, *self._held))
        self._next.close()
