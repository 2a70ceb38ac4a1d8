"""Unsampled turns kept for their feedback: the sample step finishes an unsampled turn through
this step, which hands it on to be committed at once and queues it, redacted, for a writer
thread that keeps it in ``retained_turns`` (``RetainedTurns.retain``), or, given a ``keeper``
(``outcomes.retain_process``), hands its batches to the keeper's process
(``keeper_process.py``): a turn no step changed then waits as its record (``Record``: the
topic and the record's bytes), decoded and serialised there, off the consumer's thread. On a
Kafka source (``places``) such a turn is kept as its record's place instead (``Place``: topic,
partition, offset), which the feedback judging job reads back from Kafka when feedback asks for
the turn (``stream/reread.py``): nothing of its text is written, nor decoded again. Places
are queued apart, as plain tuples, and written a batch at a time, one row per partition
(``PlaceBatch``): a row per turn, and the object of each, cost intake a third of its rate.

Keeping is best effort and never slows intake: the queue is bounded (``max_queued``), a turn
that finds it full is not kept (``casewatch_turns_retained_total{outcome="dropped"}``), a batch
the database does not take is not kept either (``outcome="failed"``, logged once per outage),
and its offset is committed all the same: the turn was not sampled, and nothing about it is
lost but the chance to judge it for feedback. The writer thread is the pipeline's to close.
With screening processes (``daemon.screen_processes``) the turns they finish come back as rows
made there (``keep_row``), redacted as here, and join the same queue.

What waits in the queue is the row to write, serialised on the consumer thread, not the turn:
a queued ``TurnEvent`` (a tree of models, dicts and lists) outlives the young garbage-collector
generations, and the full collections it then brings walk every object of the daemon, on
whichever thread allocates. That cost more than serialising the turn (``bench/ingest.py
--outcomes``). A turn that still needs redacting (``redaction.before_judging: false``) waits as
it is, and is redacted and serialised on the writer thread, off intake.

The consumer thread's share is kept to the serialisation itself: ``model_dump_json``'s text
from the model's serializer without that method's frame and keyword defaults per turn, and the
row appended to the queue without the writer's lock (a deque's append, pop and length are
atomic, and only the consumer thread appends, so the bound holds; the lock is taken to wake the
writer once a batch waits, not per turn).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

import structlog

from consumers.records import TopicPartition
from monitor.errors import CasewatchError
from monitor.schema.turn import TurnEvent
from monitor.storage.retained_turns import PlaceBatch, RetainedRow
from monitor.stream.steps.base import DoneStep, Envelope

log = structlog.get_logger(__name__)


class Record(NamedTuple):
    """A turn the keeper's process decodes from its record, and serialises: as it is when the
    daemon's redaction found nothing in it, else redacted there (``redact``)."""

    topic: str
    value: bytes | None
    redact: bool


# A turn read from Kafka, kept as its record's place (``outcomes.retain_unsampled`` on a Kafka
# source): (event id, conversation id, assistant, topic-partition, offset). Read back from
# Kafka, decoded and redacted when feedback asks for it (``stream/reread.py``).
Place = tuple[str, str, str, TopicPartition, int]

Queued = TurnEvent | RetainedRow | Record
BATCH = 1000
FLUSH_INTERVAL_S = 0.5


# ``TurnEvent.model_dump_json``'s serializer, called with the same defaults (same text).
_TO_JSON = TurnEvent.__pydantic_serializer__.to_json


def turn_row(turn: TurnEvent) -> RetainedRow:
    return (turn.event_id, turn.conversation_id, turn.assistant.name, _TO_JSON(turn).decode())


class RetainWriter(Protocol):
    def retain(
        self, items: Sequence[RetainedRow], now: Any = None, places: Sequence[PlaceBatch] = ()
    ) -> int: ...


class Kept(Protocol):
    @property
    def stored(self) -> int: ...
    @property
    def dropped(self) -> int: ...  # could not be decoded or redacted: not kept
    @property
    def failed(self) -> int: ...  # the database did not take them
    @property
    def error(self) -> str | None: ...  # why, when ``failed``


class RawKeeper(Protocol):
    """Keeps turns from their records' (topic, value) elsewhere (``keeper_process.py``)."""

    def start(self) -> None: ...

    def keep(self, items: Sequence[RetainedRow | Record | PlaceBatch]) -> Sequence[Kept]: ...

    def collect(self, *, wait: bool = False, every: bool = False) -> Sequence[Kept]: ...

    def close(self) -> None: ...


class RetainMetrics(Protocol):
    def record_retained(self, outcome: str, count: int) -> None: ...


class RetainingDone:
    """A done step for unsampled turns: commits them and keeps them for feedback."""

    def __init__(
        self,
        done: DoneStep,
        writer: RetainWriter,
        metrics: RetainMetrics,
        *,
        redact: Callable[[TurnEvent], TurnEvent] | None = None,
        max_queued: int = 10_000,
        keeper: RawKeeper | None = None,
        places: bool = False,
    ) -> None:
        """``keeper``: where turns that came with their record's value are kept from it (the
        rest, assembled from spans or finished by a screening process, are written here).
        ``places``: the records can be read again (a Kafka source): a turn that came with its
        record's value is kept as the record's place (``Place``), not as its text."""
        self._done = done
        self._writer = writer
        self._metrics = metrics
        self._redact = redact
        self._max = max_queued
        self._keeper = keeper
        self._places = places
        if keeper is not None:
            keeper.start()
        self._queue: deque[Queued] = deque()
        self._place_queue: deque[Place] = deque()  # bounded with ``_queue``: ``max_queued``
        self._lock = threading.Condition()
        # Set once the writer was woken for a full batch, cleared when it takes one: the
        # consumer thread takes the lock once per batch, not per turn.
        self._woken = False
        self._taken_at = time.monotonic()  # when the writer last took a batch
        self._stopping = False
        self._failing = False
        self._dropping = False
        self._thread = threading.Thread(target=self._run, name="retain-unsampled", daemon=True)
        self._thread.start()

    def submit(self, message: Envelope[Any]) -> None:
        turn = message.payload
        if isinstance(turn, TurnEvent):
            queue = self._queue
            raw = message.raw
            if raw is not None and self._places:
                # Read back from Kafka, decoded and redacted then, if feedback asks for it.
                places = self._place_queue
                if len(places) + len(queue) >= self._max:
                    self._drop()
                else:
                    places.append((turn.event_id, turn.conversation_id, turn.assistant.name,
                                   message.tp, message.offset))  # fmt: skip
                    if len(places) >= BATCH and not self._woken:
                        self._wake()
                    if self._dropping:
                        self._keeping_again()
            elif len(queue) + len(self._place_queue) >= self._max:
                self._drop()
            else:
                item: Queued
                if raw is not None and self._keeper is not None:
                    # Decoded (the same turn: nothing changed it since) and serialised in the
                    # keeper's process, not here; redacted there when the chain redacts only
                    # for storage. Never the bytes themselves: a duplicated key could hold
                    # text redaction never saw.
                    item = Record(message.tp.topic, raw, self._redact is not None)
                elif self._redact is not None:
                    item = turn  # redacted and serialised on the writer thread
                else:
                    item = (turn.event_id, turn.conversation_id, turn.assistant.name,
                            _TO_JSON(turn).decode())  # fmt: skip
                queue.append(item)  # atomic: the writer pops under its lock, this appends without
                if len(queue) >= BATCH and not self._woken:
                    self._wake()
                if self._dropping:
                    self._keeping_again()
        self._done.submit(message)

    def keep_row(self, row: RetainedRow | None) -> None:
        """Keep a turn the screening processes finished, as the row they made of it (redacted
        as ``redact`` would; None: it could not be redacted, counted ``dropped``). The record
        itself is finished by the screening step, not here."""
        if row is None:
            self._metrics.record_retained("dropped", 1)
            return
        self._enqueue(row)

    def _enqueue(self, item: TurnEvent | RetainedRow) -> None:
        queue = self._queue
        if len(queue) + len(self._place_queue) >= self._max:
            self._drop()
            return
        queue.append(item)  # atomic: the writer pops under its lock, this appends without
        if len(queue) >= BATCH and not self._woken:
            self._wake()
        if self._dropping:
            self._keeping_again()

    def _wake(self) -> None:
        """Wake the writer for the batch that waits (once, until it takes one)."""
        with self._lock:
            self._woken = True
            self._lock.notify()

    def _drop(self) -> None:
        self._metrics.record_retained("dropped", 1)
        if not self._dropping:  # said once per episode, counted every time
            self._dropping = True
            log.warning(
                "unsampled turns not kept for feedback: the writer's queue is full",
                max_queued=self._max,
            )

    def _keeping_again(self) -> None:
        self._dropping = False
        log.info("unsampled turns kept for feedback again")

    def poll(self) -> None:
        self._done.poll()

    def join(self, timeout: float | None = None) -> None:
        self._done.join(timeout)

    def close(self) -> None:
        """Stop the writer after one last batch (what is still queued then is not kept)."""
        with self._lock:
            self._stopping = True
            self._lock.notify()
        self._thread.join(timeout=10.0)
        if self._keeper is not None:
            self._keeper.close()

    def _take(self) -> tuple[list[Queued], list[Place]]:
        """A batch to write: once ``BATCH`` turns wait, else what waits ``FLUSH_INTERVAL_S``
        after the last take. Taking whatever waited at once wrote a busy stream's turns a few
        dozen at a time, each a transaction, and held the GIL the consumer needs."""
        with self._lock:
            while not self._stopping and len(self._queue) + len(self._place_queue) < BATCH:
                remaining = self._taken_at + FLUSH_INTERVAL_S - time.monotonic()
                if remaining <= 0:
                    break
                self._lock.wait(remaining)
            self._taken_at = time.monotonic()
            self._woken = False
            queue, places = self._queue, self._place_queue
            batch = [queue.popleft() for _ in range(min(BATCH, len(queue)))]
            # Places are cheap to write: all that wait, a row per partition.
            return batch, [places.popleft() for _ in range(len(places))]

    def _run(self) -> None:
        keeper = self._keeper
        while True:
            batch, places = self._take()
            if batch or places:
                self._write(batch, places)
            elif keeper is not None:
                self._settle(keeper.collect())
            with self._lock:
                if self._stopping:
                    dropped = len(self._queue) + len(self._place_queue)
                    self._queue.clear()
                    self._place_queue.clear()
                    break
        if keeper is not None:
            self._settle(keeper.collect(every=True))
        if dropped:
            self._metrics.record_retained("dropped", dropped)

    def _write(self, batch: list[Queued], places: list[Place]) -> None:
        items: list[RetainedRow | Record | PlaceBatch] = []
        for item in batch:
            if not isinstance(item, TurnEvent):
                items.append(item)
                continue
            try:
                kept = item if self._redact is None else self._redact(item)
            except Exception:  # too large or a detector failed: never kept unredacted
                self._metrics.record_retained("dropped", 1)
                continue
            items.append(turn_row(kept))
        batches = place_batches(places)
        if self._keeper is not None:
            self._settle(self._keeper.keep([*items, *batches]))
            return
        rows = [item for item in items if not isinstance(item, Record | PlaceBatch)]
        try:
            self._writer.retain(rows, places=batches)
        except CasewatchError as exc:
            self._failed(len(rows) + len(places), str(exc))
        else:
            self._stored(len(rows) + len(places))

    def _settle(self, ended: Sequence[Kept]) -> None:
        """Count the batches the keeper's process finished."""
        for result in ended:
            if result.dropped:
                self._metrics.record_retained("dropped", result.dropped)
            if result.failed:
                self._failed(result.failed, result.error or "")
            elif result.stored:
                self._stored(result.stored)

    def _failed(self, count: int, error: str) -> None:
        self._metrics.record_retained("failed", count)
        if not self._failing:
            self._failing = True
            log.warning("unsampled turns not kept for feedback", error=error)

    def _stored(self, count: int) -> None:
        if self._failing:
            self._failing = False
            log.info("unsampled turns kept for feedback again")
        self._metrics.record_retained("stored", count)


def place_batches(places: Sequence[Place]) -> list[PlaceBatch]:
    """``places`` as one batch per partition, in the order read."""
    by_partition: dict[TopicPartition, tuple[list[str], list[str], list[str], list[int]]] = {}
    for event_id, conversation_id, assistant, tp, offset in places:
        lists = by_partition.get(tp)
        if lists is None:
            lists = by_partition[tp] = ([], [], [], [])
        lists[0].append(event_id)
        lists[1].append(conversation_id)
        lists[2].append(assistant)
        lists[3].append(offset)
    return [PlaceBatch(tp.topic, tp.partition, *lists) for tp, lists in by_partition.items()]
