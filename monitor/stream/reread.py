"""Turns kept for feedback as their Kafka record's place, read back when a negative feedback
asks for one to be judged (the feedback judging job, ``jobs/feedback_judging.py``).

On a Kafka source the pipeline's ``RetainingDone`` keeps an unsampled turn as the place of its
record (topic, partition, offset), not as its text: nothing of the turn is written by casewatch
until feedback asks for it. Here the record is read back (``consumers/record_reader.py``) and
decoded and redacted with the chain's own ``TurnDecisions``, as the decode and redact steps
did and as a kept row would have been (``TurnDecisions.read_back``), so the judge sees what it
would have seen had the turn been kept as text. A record Kafka no longer has, another turn at
that place, or a record that can no longer be decoded or redacted is ``RecordGone`` with its
reason, which the job counts (``casewatch_turns_retained_total{outcome}``).
"""

from __future__ import annotations

from typing import Protocol

from monitor.errors import InvalidEvent, RecordGone
from monitor.schema.turn import TurnEvent
from monitor.storage.retained_turns import KeptTurn
from monitor.stream.steps.decisions import TurnDecisions


class RecordReader(Protocol):
    def read(self, topic: str, partition: int, offset: int) -> bytes | None: ...

    def close(self) -> None: ...


class TurnReread:
    def __init__(self, reader: RecordReader, decisions: TurnDecisions) -> None:
        self._reader = reader
        self._decisions = decisions

    def __call__(self, kept: KeptTurn) -> TurnEvent:
        topic, partition, offset = kept.topic, kept.partition, kept.offset
        if topic is None or partition is None or offset is None:
            raise RecordGone("unreadable", f"{kept.event_id}: kept with no record's place")
        value = self._reader.read(topic, partition, offset)
        where = f"{topic}[{partition}]@{offset}"
        try:
            turn = self._decisions.read_back(topic, value)
        except InvalidEvent as exc:
            raise RecordGone("unreadable", f"{where}: {exc.reason}") from None
        if turn is None:
            raise RecordGone("unreadable", f"{where}: cannot be redacted")
        if turn.event_id != kept.event_id:
            raise RecordGone("unreadable", f"{where} holds {turn.event_id}, not {kept.event_id}")
        return turn

    def close(self) -> None:
        self._reader.close()
