"""Verdicts reach a real OTLP/HTTP receiver as gen_ai.evaluation.result log records on the
evaluated span; with the receiver down, sending never blocks and every drop is counted; a
bounded close does not wait for an export that hangs."""

from __future__ import annotations

import socket
import threading
from collections.abc import Sequence
from datetime import UTC, datetime

from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult

from monitor.otel_export.records import TURN_EVALUATION, evaluation_records
from monitor.otel_export.sender import EvaluationSender
from monitor.schema.turn import (
    METRICS,
    Band,
    JudgeScores,
    Judgment,
    MetricScore,
    TurnEvent,
    Verdict,
)
from tests.otlp_receiver import otlp_receiver

TRACE = "0af7651916cd43dd8448eb211c80319c"
SPAN = "c000000000000003"


class Counts:
    def __init__(self) -> None:
        self.by_outcome: dict[str, int] = {}
        self.cond = threading.Condition()

    def record_evaluation_export(self, outcome: str, count: int) -> None:
        with self.cond:
            self.by_outcome[outcome] = self.by_outcome.get(outcome, 0) + count
            self.cond.notify_all()

    def wait(self, outcome: str, at_least: int) -> int:
        with self.cond:
            self.cond.wait_for(lambda: self.by_outcome.get(outcome, 0) >= at_least, 60)
            return self.by_outcome.get(outcome, 0)


def _turn() -> TurnEvent:
    return TurnEvent.model_validate(
        {
            "event_id": "e",
            "conversation_id": "c",
            "turn_index": 0,
            "timestamp": datetime(2026, 11, 28, tzinfo=UTC),
            "assistant": {"name": "bot", "version": "1", "model": "m"},
            "case": {"subject": "s", "description": "d"},
            "query": "q",
            "answer": "a",
            "trace_id": TRACE,
            "span_id": SPAN,
        }
    )


def _verdict() -> Verdict:
    score = MetricScore(score=0.9, justification="Mail jane.doe@example.com said so.")
    scores = JudgeScores(**{m: score for m in METRICS})
    return Verdict(
        event_id="e",
        conversation_id="c",
        turn_index=0,
        assistant=_turn().assistant,
        status="ok",
        weight_profile="default",
        s_final=0.9,
        final_band=Band.NONE,
        turn_band=Band.NONE,
        metric_scores={m: 0.9 for m in METRICS},
        metric_bands={m: Band.NONE for m in METRICS},
        judgments=[Judgment(judge="h", kind="heuristic", model="h", status="ok", scores=scores)],
    )


def test_records_reach_the_receiver_on_the_evaluated_span() -> None:
    counts = Counts()
    with otlp_receiver() as receiver:
        sender = EvaluationSender(receiver.url, counts, schedule_delay_ms=50)
        records = evaluation_records(
            _turn(), _verdict(), 1, redact=lambda t: t.replace("jane.doe@example.com", "<EMAIL_1>")
        )
        sender.send(records)
        got = receiver.wait_for(len(METRICS) + 1)
        sender.close()
    assert len(got) == len(METRICS) + 1
    assert {r.event_name for r in got} == {"gen_ai.evaluation.result"}
    assert {(r.trace_id, r.span_id) for r in got} == {(TRACE, SPAN)}
    by_name = {r.attributes["gen_ai.evaluation.name"]: r.attributes for r in got}
    assert set(by_name) == {*METRICS, TURN_EVALUATION}
    hallucination = by_name["hallucination"]
    assert hallucination["gen_ai.evaluation.score.value"] == 0.9
    assert hallucination["gen_ai.evaluation.score.label"] == "none"
    assert hallucination["gen_ai.evaluation.explanation"] == "Mail <EMAIL_1> said so."
    assert by_name[TURN_EVALUATION]["gen_ai.evaluation.score.label"] == "none"
    assert got[0].resource["service.name"] == "casewatch"
    assert counts.wait("exported", len(METRICS) + 1) == len(METRICS) + 1


def test_a_failed_verdict_is_one_record_without_a_score() -> None:
    failed = _verdict().model_copy(
        update={"status": "judge_failed", "failure_reason": "invalid_output", "s_final": None}
    )
    (record,) = evaluation_records(_turn(), failed, 1)
    assert record.attributes == {
        "gen_ai.evaluation.name": TURN_EVALUATION,
        "gen_ai.evaluation.score.label": "judge_failed",
        "error.type": "invalid_output",
    }


def test_a_turn_without_a_span_gets_no_records() -> None:
    native = _turn().model_copy(update={"trace_id": None, "span_id": None})
    assert evaluation_records(native, _verdict(), 1) == []


def test_with_the_receiver_down_sending_never_blocks_and_drops_are_counted() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    counts = Counts()
    sender = EvaluationSender(
        f"http://127.0.0.1:{port}",
        counts,
        timeout_s=0.5,
        max_queue_size=20,
        max_batch_size=10,
        schedule_delay_ms=10,
    )
    records = evaluation_records(_turn(), _verdict(), 1)
    for _ in range(20):
        sender.send(records)  # 180 records into a queue of 20
    assert counts.wait("queue_full", 1) >= 1
    assert counts.wait("export_failed", 1) >= 1
    sender.close()
    total = sum(counts.by_outcome.values())
    assert counts.by_outcome.get("exported", 0) == 0
    assert total == 20 * len(records)


class HangingExporter(LogRecordExporter):
    """An export that does not return until released, as one to an endpoint that hangs."""

    def __init__(self) -> None:
        self.exporting = threading.Event()
        self.release = threading.Event()

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        self.exporting.set()
        self.release.wait()
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def test_a_bounded_close_gives_up_on_an_export_that_hangs() -> None:
    exporter = HangingExporter()
    sender = EvaluationSender(
        "http://127.0.0.1:9", Counts(), exporter=exporter, schedule_delay_ms=10
    )
    try:
        sender.send(evaluation_records(_turn(), _verdict(), 1))
        assert exporter.exporting.wait(60), "the export never started"
        closer = threading.Thread(target=sender.close, kwargs={"timeout_s": 0.0}, daemon=True)
        closer.start()
        closer.join(60)  # a hang guard: the close under test returns at once
        assert not closer.is_alive(), "close waited for the export"
        # The SDK's shutdown goes on waiting for the export, on a thread the exit does not wait
        # for.
        [shutdown] = [t for t in threading.enumerate() if t.name == "evaluation-export-close"]
        assert shutdown.is_alive() and shutdown.daemon
    finally:
        exporter.release.set()
