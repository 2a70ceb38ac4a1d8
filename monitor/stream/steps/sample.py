"""Sampling: a turn not selected is finished here (counted by reason); the rest go on.

The sampler's decision for a record is kept while the next step rejects it, so offering the
same record again never consumes a second unit of the hourly budget.

Decisions are counted in a dict and added to the counters once per ``poll`` (and on ``join``):
a Prometheus increment takes a lock, and on the ingest path it was a per-record cost.
"""

from __future__ import annotations

from typing import Protocol

from consumers.sampling import SampleDecision
from monitor.models import TurnEvent
from monitor.stream.steps.base import DoneStep, Envelope, ProcessingStep


class SamplingMetrics(Protocol):
    def record_sampling(self, assistant: str, decision: SampleDecision, count: int = 1) -> None: ...


class Decider(Protocol):
    def decide(self, turn: TurnEvent) -> SampleDecision: ...


class SampleStep:
    def __init__(
        self,
        next_step: ProcessingStep[TurnEvent],
        done: DoneStep,
        sampler: Decider,
        metrics: SamplingMetrics,
    ) -> None:
        self._next = next_step
        self._done = done
        self._sampler = sampler
        self._metrics = metrics
        self._held: tuple[Envelope[TurnEvent], SampleDecision] | None = None
        # (assistant, sampled, reason) -> turns decided since the last flush; plain values
        # because a frozen dataclass hashes in Python.
        self._counts: dict[tuple[str, bool, str], int] = {}

    def submit(self, message: Envelope[TurnEvent]) -> None:
        held = self._held
        if held is not None and held[0].offset == message.offset and held[0].tp == message.tp:
            decision = held[1]
        else:
            decision = self._sampler.decide(message.payload)
        if decision.sampled:
            self._held = (message, decision)
            self._next.submit(message)  # MessageRejected leaves the decision held
        else:
            self._done.submit(message)
        self._held = None
        key = (message.payload.assistant.name, decision.sampled, decision.reason)
        counts = self._counts
        counts[key] = counts.get(key, 0) + 1

    def _flush_counts(self) -> None:
        counts, self._counts = self._counts, {}
        for (assistant, sampled, reason), n in counts.items():
            self._metrics.record_sampling(assistant, SampleDecision(sampled, reason), n)

    def poll(self) -> None:
        self._flush_counts()
        self._next.poll()

    def join(self, timeout: float | None = None) -> None:
        self._flush_counts()
        self._next.join(timeout)

    def close(self) -> None:
        self._next.close()
