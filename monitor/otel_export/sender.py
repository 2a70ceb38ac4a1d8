"""Evaluation records → an OTLP/HTTP endpoint, off the stream's thread (the SDK adapter).

The official OpenTelemetry SDK does the work: a ``LoggerProvider`` whose
``BatchLogRecordProcessor`` batches records on its own worker thread and hands them to the
OTLP/HTTP protobuf log exporter, which retries with backoff within its timeout. ``send`` only
puts records in the processor's queue, so a slow or dead endpoint never stalls judging.

The queue is bounded. The SDK drops the oldest record silently when its queue is full, so this
adapter keeps its own count of records handed over and not yet taken by the exporter, and
drops a new record itself (counted, ``queue_full``) before the SDK would; a batch the exporter
gives up on is counted ``export_failed``. Both are what the drop alert watches.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Protocol

import requests
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    LogRecordExporter,
    LogRecordExportResult,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

import monitor
from monitor.otel_export.records import EVENT_NAME, EvaluationRecord

# Outcomes of casewatch_evaluation_records_total.
OUTCOMES: tuple[str, ...] = ("exported", "queue_full", "export_failed")


class ExportMetrics(Protocol):
    def record_evaluation_export(self, outcome: str, count: int) -> None: ...


class _Counting(LogRecordExporter):
    """Wraps the OTLP exporter: counts what it takes and what it exported or gave up on."""

    def __init__(self, inner: LogRecordExporter, owner: EvaluationSender) -> None:
        self._inner = inner
        self._owner = owner

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        self._owner._taken(len(batch))
        try:
            result = self._inner.export(batch)
        except Exception:
            self._owner._metrics.record_evaluation_export("export_failed", len(batch))
            raise
        outcome = "exported" if result is LogRecordExportResult.SUCCESS else "export_failed"
        self._owner._metrics.record_evaluation_export(outcome, len(batch))
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)


class EvaluationSender:
    def __init__(
        self,
        endpoint: str,
        metrics: ExportMetrics,
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 10.0,
        max_queue_size: int = 2048,
        max_batch_size: int = 512,
        schedule_delay_ms: int = 1000,
        service_name: str = "casewatch",
        exporter: LogRecordExporter | None = None,
    ) -> None:
        self._metrics = metrics
        self._max_queue = max_queue_size
        self._pending = 0
        self._lock = threading.Lock()
        # Our own session, closed in close(): the exporter's shutdown leaves its pooled
        # connections open.
        self._session = requests.Session()
        inner = exporter or OTLPLogExporter(
            endpoint=endpoint.rstrip("/") + "/v1/logs",
            headers=dict(headers or {}),
            timeout=timeout_s,
            session=self._session,
        )
        self._provider = LoggerProvider(
            resource=Resource.create(
                {"service.name": service_name, "service.version": monitor.__version__}
            )
        )
        self._provider.add_log_record_processor(
            BatchLogRecordProcessor(
                _Counting(inner, self),
                schedule_delay_millis=schedule_delay_ms,
                max_export_batch_size=min(max_batch_size, max_queue_size),
                max_queue_size=max_queue_size,
            )
        )
        self._logger = self._provider.get_logger("casewatch.evaluation", monitor.__version__)

    def _taken(self, count: int) -> None:
        with self._lock:
            self._pending -= count

    def send(self, records: Sequence[EvaluationRecord]) -> None:
        """Queue the records (never blocks); what does not fit is dropped and counted."""
        dropped = 0
        for record in records:
            with self._lock:
                if self._pending >= self._max_queue:
                    dropped += 1
                    continue
                self._pending += 1
            context = set_span_in_context(
                NonRecordingSpan(
                    SpanContext(
                        record.trace_id,
                        record.span_id,
                        is_remote=True,
                        trace_flags=TraceFlags(TraceFlags.SAMPLED),
                    )
                )
            )
            self._logger.emit(
                timestamp=record.timestamp_ns,
                context=context,
                severity_number=SeverityNumber.INFO,
                event_name=EVENT_NAME,
                attributes=record.attributes,
            )
        if dropped:
            self._metrics.record_evaluation_export("queue_full", dropped)

    def flush(self, timeout_s: float) -> bool:
        return self._provider.force_flush(int(timeout_s * 1000))

    def close(self, timeout_s: float | None = None) -> None:
        """Export what is queued, then stop the worker. The SDK's shutdown waits up to 30 s
        for an endpoint that does not answer; with ``timeout_s`` it runs on a daemon thread of
        its own and is given up after that long (what it had not exported is lost), so a stop
        keeps its bound."""
        if timeout_s is None:
            self._shut_down()
            return
        closing = threading.Thread(
            target=self._shut_down, name="evaluation-export-close", daemon=True
        )
        closing.start()
        closing.join(timeout_s)

    def _shut_down(self) -> None:
        try:
            self._provider.shutdown()
        finally:
            self._session.close()
