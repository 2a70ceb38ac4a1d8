"""A conversation without an id: a turn event without ``conversation_id`` is refused with the
field named (the stream dead-letters it as ``schema``, nothing judged half-identified), and a
turn read from an OpenTelemetry trace without ``gen_ai.conversation.id`` takes its trace id, so
each such turn is a case of its own (docs/cases.md)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from consumers.otel.genai import turns_from_trace
from monitor.judging.heuristic.case_judge import HeuristicCaseJudge
from monitor.runtime.clock import ManualClock
from monitor.schema.turn import TurnEvent
from monitor.storage import case_queries
from monitor.storage.store import Store
from tests.consumers.otel.spans import genai_trace
from tests.support.cases import case_job, store_turn, turn


def test_a_turn_event_without_a_conversation_id_is_refused_naming_the_field() -> None:
    doc: dict[str, Any] = turn("conv-x", 0).model_dump(mode="json")
    del doc["conversation_id"]
    with pytest.raises(ValidationError, match="conversation_id"):
        TurnEvent.model_validate(doc)


def test_traces_without_a_conversation_id_are_one_case_each(store: Store) -> None:
    events = []
    for trace_id in ("1" * 32, "2" * 32):
        spans = genai_trace(trace_id=trace_id)
        for s in spans:
            s.attributes.pop("gen_ai.conversation.id", None)
        [event], skipped = turns_from_trace(spans)
        assert skipped == [] and event.conversation_id == trace_id
        events.append(event)
    clock = ManualClock(start=1_800_000_000.0)
    timed = Store(store.url, clock=clock)
    try:
        for event in events:
            store_turn(timed, event)
        clock.advance(601)
        judged = case_job(timed, [HeuristicCaseJudge()], clock).run_once()
    finally:
        timed.close()
    assert sorted((v.conversation_id, v.turns) for v in judged) == [("1" * 32, 1), ("2" * 32, 1)]
    assert [r["version"] for r in case_queries.case_history(store, "1" * 32)] == [1]
