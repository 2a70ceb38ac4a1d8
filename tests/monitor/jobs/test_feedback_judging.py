"""Feedback-triggered judging on SQLite and PostgreSQL with the real heuristic judge: a kept
unsampled turn with negative feedback is judged once, charged to the budget, counted under its
own sampling reason and kept out of the random sample's rates; kept turns are bounded."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from monitor.config.settings import Settings, load_settings
from monitor.errors import BrokerError, RecordGone
from monitor.jobs.feedback_judging import FeedbackJudgingJob
from monitor.jobs.recorders import OutcomeRecorder
from monitor.judging.evaluator import build_evaluator
from monitor.judging.recorder import JudgingRecorder
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.sampling.sampler import Sampler
from monitor.schema.outcome import OutcomeEvent
from monitor.schema.turn import TurnEvent
from monitor.storage.detection_queries import read_new
from monitor.storage.outcomes import OutcomeRecords
from monitor.storage.retained_turns import PlaceBatch, RetainedTurns
from monitor.storage.store import Store
from monitor.storage.tables import retained_turns, turns
from monitor.stream.pipeline import PipelineConfig, chain_decisions
from monitor.stream.reread import TurnReread
from tests.fixtures.databases import make_turn, make_verdict
from tests.fixtures.outcomes import feedback

CLOCK_START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC).timestamp()


def negative(outcome_id: str, turn: str, thumbs: str = "down") -> tuple[OutcomeEvent, None]:
    return feedback(outcome_id, turn, thumbs), None


def keep(kept: RetainedTurns, *turns: TurnEvent) -> None:
    kept.retain(
        [(t.event_id, t.conversation_id, t.assistant.name, t.model_dump_json()) for t in turns]
    )


def job_for(
    settings: Settings, store: Store, clock: ManualClock, registry: CollectorRegistry
) -> tuple[FeedbackJudgingJob, Metrics]:
    metrics = Metrics(registry)
    job = FeedbackJudgingJob(
        settings.outcomes,
        store,
        OutcomeRecords(store, clock),
        RetainedTurns(store, clock),
        build_evaluator(settings, concurrency=1),
        Sampler(settings.sampling, clock).budget,
        OutcomeRecorder(metrics),
        JudgingRecorder(metrics),
    )
    return job, metrics


def value(registry: CollectorRegistry, name: str, **labels: Any) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def test_a_kept_turn_with_negative_feedback_is_judged_once_outside_the_random_rates(
    store: Store,
) -> None:
    clock = ManualClock(CLOCK_START)
    settings = load_settings(None, outcomes={"retain_unsampled": True})
    records = OutcomeRecords(store, clock)
    sampled = make_turn("evt-sampled")
    store.save(sampled, make_verdict(sampled))  # judged by the random sample already
    keep(
        RetainedTurns(store, clock),
        make_turn("evt-kept"),
        make_turn("evt-liked"),
        make_turn("evt-sampled"),
    )
    records.save(
        [
            negative("f-1", "evt-kept"),
            negative("f-2", "evt-liked", "up"),
            negative("f-3", "evt-sampled"),
            negative("f-4", "evt-gone"),
        ]
    )
    registry = CollectorRegistry()
    job, _ = job_for(settings, store, clock, registry)
    try:
        job.run()
        job.run()  # once: nothing left the second time
    finally:
        job.close()
    assert job.judged == 1
    assert (
        value(registry, "casewatch_turns_sampled_total", assistant="helpdesk", reason="feedback")
        == 1
    )
    bands = {
        band: value(registry, "casewatch_feedback_judged_total", assistant="helpdesk", band=band)
        for band in ("severe", "moderate", "minor", "none", "judge_failed")
    }
    assert sum(bands.values()) == 1
    # Never in the random sample's series, and never seen by the detectors: of the two stored
    # verdicts, only the sampled turn's is left for them to observe.
    assert (
        registry.get_sample_value(
            "casewatch_turns_judged_total", {"assistant": "helpdesk", "band": "none"}
        )
        is None
    )
    assert len(read_new(store, ["hallucination"])) == 1
    assert value(registry, "casewatch_judge_requests_total", judge="heuristic", outcome="ok") == 1


def test_a_refusing_budget_judges_nothing_and_says_why(store: Store) -> None:
    clock = ManualClock(CLOCK_START)
    settings = load_settings(
        None, outcomes={"retain_unsampled": True}, sampling={"budget_calls_per_hour": 0}
    )
    records = OutcomeRecords(store, clock)
    kept = RetainedTurns(store, clock)
    keep(kept, make_turn("evt-kept"))
    records.save([negative("f-1", "evt-kept")])
    registry = CollectorRegistry()
    job, _ = job_for(settings, store, clock, registry)
    try:
        job.run()
    finally:
        job.close()
    assert job.judged == 0
    assert (
        value(
            registry, "casewatch_turns_skipped_total", assistant="helpdesk", reason="budget_calls"
        )
        == 1
    )
    assert len(kept.feedback_to_judge(10)) == 1  # still waiting for the budget


def test_kept_turns_are_bounded_in_age_and_count(store: Store) -> None:
    clock = ManualClock(CLOCK_START)
    records = OutcomeRecords(store, clock)
    kept = RetainedTurns(store, clock)
    keep(kept, make_turn("old-1"), make_turn("old-2"))
    clock.advance(100)
    keep(kept, *(make_turn(f"new-{i}") for i in range(5)))
    assert kept.prune(max_age_s=50, max_rows=1000) == 2
    assert kept.prune(max_age_s=50, max_rows=3) == 2
    for i in range(5):
        records.save([negative(f"f-{i}", f"new-{i}")])
    assert sorted(json.loads(k.event)["event_id"] for k in kept.feedback_to_judge(10)) == [
        "new-2",
        "new-3",
        "new-4",
    ]


class Records:
    """Kafka's records by place; a missing one is gone (``expired``); ``down``: the broker
    does not answer."""

    def __init__(self, values: dict[tuple[str, int, int], bytes]) -> None:
        self.values = values
        self.down = False
        self.closed = False

    def read(self, topic: str, partition: int, offset: int) -> bytes | None:
        if self.down:
            raise BrokerError("reading a record: Kafka at test failed")
        value = self.values.get((topic, partition, offset))
        if value is None:
            raise RecordGone("expired", f"{topic}[{partition}]@{offset}: gone")
        return value

    def close(self) -> None:
        self.closed = True


def test_a_turn_kept_as_its_record_is_read_back_redacted_and_a_gone_one_is_counted(
    store: Store,
) -> None:
    """On a Kafka source unsampled turns are kept as their records' places, a batch at a time:
    the job finds those its feedback asks for (the join), reads each record back, decodes and
    redacts it with the chain's own decisions, and judges it; a record Kafka no longer has, or
    one that holds another turn, is forgotten and counted with its reason; a broker that does
    not answer ends the run and the turn is tried again."""
    clock = ManualClock(CLOCK_START)
    settings = load_settings(None, outcomes={"retain_unsampled": True})
    records = OutcomeRecords(store, clock)
    mail = "jane.doe@example.com"
    with_mail = make_turn("evt-read", query=f"My VPN drops, write to {mail}")
    kafka = Records(
        {
            ("turns", 0, 7): with_mail.model_dump_json().encode(),
            ("turns", 1, 3): make_turn("evt-other").model_dump_json().encode(),
        }
    )
    places = [
        PlaceBatch(
            "turns",
            0,
            ["evt-read", "evt-expired", "evt-quiet"],
            ["conv-evt-read", "conv-evt-expired", "conv-evt-quiet"],
            ["helpdesk"] * 3,
            [7, 2, 9],
        ),
        PlaceBatch("turns", 1, ["evt-moved"], ["conv-evt-moved"], ["helpdesk"], [3]),  # evt-other
    ]
    kept_turns = RetainedTurns(store, clock)
    kept_turns.retain([], places=places)
    with store.transaction(write=False) as conn:
        assert conn.scalars(sa.select(retained_turns.c.event_id)).all() == []  # a row a batch
    asked = ["evt-read", "evt-expired", "evt-moved"]  # no feedback on evt-quiet
    records.save([negative(f"f-{e}", e) for e in asked])
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    reread = TurnReread(kafka, chain_decisions(PipelineConfig.from_settings(settings)))
    job = FeedbackJudgingJob(
        settings.outcomes,
        store,
        records,
        kept_turns,
        build_evaluator(settings, concurrency=1),
        Sampler(settings.sampling, clock).budget,
        OutcomeRecorder(metrics),
        JudgingRecorder(metrics),
        reread=reread,
    )
    try:
        kafka.down = True
        job.run()  # found, but nothing read back: every turn waits for the next run
        assert job.judged == 0
        assert len(kept_turns.feedback_to_judge(10)) == 3
        assert value(registry, "casewatch_outcome_joins_total", outcome="later") == 3
        job.run()  # still down: held again, counted again
        assert value(registry, "casewatch_turns_retained_total", outcome="unreached") == 2
        kafka.down = False
        job.run()
        job.run()
    finally:
        job.close()
    assert kafka.closed
    assert job.judged == 1
    for outcome, count in (("expired", 1), ("unreadable", 1), ("unreached", 2)):
        assert value(registry, "casewatch_turns_retained_total", outcome=outcome) == count
    with store.transaction(write=False) as conn:
        left = {str(e) for e in conn.scalars(sa.select(retained_turns.c.event_id))}
        event = conn.scalar(sa.select(turns.c.event).where(turns.c.event_id == "evt-read"))
    assert left == {"evt-read"}  # judged and marked; the gone ones forgotten
    text = event if isinstance(event, str) else json.dumps(event)
    assert mail not in text and "My VPN drops, write to " in text  # redacted when read back
