"""Stored verdicts → ``gen_ai.evaluation.result`` records on the evaluated span (optional).

Sits between the store step and the commit step when ``otel_export`` is configured. Only turns
that name their span (read from OpenTelemetry traces, or a producer that sets ``trace_id`` and
``span_id``) give records. Sending only queues them for the SDK's export thread
(``monitor.otel_export.sender``): a slow or dead endpoint never holds a turn here, and what the
sender drops is counted there. The explanation is the judge's justification passed through the
redactor (a judge that saw the raw turn may quote it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from monitor.otel_export.records import EvaluationRecord, evaluation_records
from monitor.stream.steps.base import DoneStep, Envelope, JudgedTurn


class RecordSink(Protocol):
    def send(self, records: Sequence[EvaluationRecord]) -> None: ...


class ExportStep:
    def __init__(
        self,
        next_step: DoneStep,
        sink: RecordSink,
        redact: Callable[[str], str] = lambda text: text,
    ) -> None:
        self._next = next_step
        self._sink = sink
        self._redact = redact

    def submit(self, message: Envelope[JudgedTurn]) -> None:
        judged = message.payload
        records = evaluation_records(judged.turn, judged.verdict, time.time_ns(), self._redact)
        if records:
            self._sink.send(records)
        self._next.submit(message)

    def poll(self) -> None:
        self._next.poll()

    def join(self, timeout: float | None = None) -> None:
        self._next.join(timeout)

    def close(self) -> None:
        self._next.close()
