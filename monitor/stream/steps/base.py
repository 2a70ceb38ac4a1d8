"""The one interface every pipeline step implements, and the envelope messages travel in.

Modelled on arroyo's ``ProcessingStrategy``: a step is built with the step after it
(composition, not inheritance), takes messages with ``submit``, does periodic work in ``poll``,
finishes what it holds in ``join`` and releases resources in ``close``. A step that cannot take
a message now raises ``monitor.errors.MessageRejected``; the caller keeps the message and
offers it again later (backpressure), so a step never buffers without bound.

Names differ from arroyo's on purpose, and so does the order. arroyo calls ``close()`` first
("no more messages"), then ``join(timeout)``, and ``terminate()`` to abandon work at once. Here
the daemon stops submitting on its own, so there is no separate "no more messages" call: it
calls ``join(timeout)`` to finish what is held, then ``close()``, which is arroyo's
``terminate()``: release resources without waiting, abandoning whatever the join did not
finish (uncommitted, hence re-read after a restart).

Every message carries the (partition, offset) it makes committable once finished; the commit
step at the end is the only place offsets are marked done, so "committed" always means
"every message below this offset has been stored, skipped or dead-lettered". A sampled turn's
envelope carries its ``Reservation`` of the hourly judge budget the same way: the step that
finishes the turn settles it with what the judge spent, and a step that drops it (already
judged, a partition revoked or rewound, the stop) releases it, so no path strands budget.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

import structlog

from consumers.file_source import FILE_TP
from consumers.records import Delivery, RawMessage, TopicPartition
from monitor.errors import InvalidEvent, MessageRejected, TransportError
from monitor.sampling.budget import Reservation
from monitor.sampling.sampler import SampleDecision
from monitor.schema.turn import TurnEvent, Verdict

if TYPE_CHECKING:  # types only: a step runs without kafka-python or the SQL driver loaded
    from consumers.dlq import DeadLetterSink
    from monitor.storage.refusals import Refused

_log = structlog.get_logger(__name__)

T_co = TypeVar("T_co", covariant=True)
U = TypeVar("U")
T_contra = TypeVar("T_contra", contravariant=True)
T = TypeVar("T")


class Look(NamedTuple):
    """The cascade's cheap look at a turn, taken ahead of the sample step by a screening process
    (``screen.py``, ``TurnDecisions.cascade_look``) and handed on with the record: what the
    sample step would otherwise compute on the consumer's thread, as plain strings (pickled
    back from the process, a few dozen bytes a turn).

    The sample step still counts the tripwire and draws against the live probabilities; it
    only takes the cell and the tripwire's result from here instead of computing them.
    """

    # The cheap cell (the offline judge's band); None: the turn is beyond
    # ``cascade_look_share`` and no rule picks it, so it is never looked at.
    cell: str | None
    # The identifier tripwire's hit kinds (empty: clean, or the chain has no tripwire).
    kinds: tuple[str, ...] = ()
    truncated: bool = False  # the tripwire checked the turn only in part


class Envelope(NamedTuple, Generic[T_co]):
    """A payload and the record it came from (immutable, hence covariant in the payload).

    A NamedTuple: one or two are built per record, and a tuple is built twice as fast as a
    frozen dataclass.
    """

    tp: TopicPartition
    offset: int
    payload: T_co
    # A sampled turn's share of the hourly judge budget, set by the sample step, settled once.
    reservation: Reservation | None = None
    # The cascade's cheap look, when a screening process took it (None: the sample step looks).
    look: Look | None = None
    # The record's bytes while decoding them gives the payload: set by the decode step, let go
    # by any step that changes the turn (``replace``). An unsampled turn is kept for feedback
    # from them, decoded and serialised in the keeper's process (``steps/keeper_process.py``).
    raw: bytes | None = None

    def replace(self, payload: U) -> Envelope[U]:
        return Envelope(self.tp, self.offset, payload, self.reservation, self.look)


def release_all(messages: Iterable[Envelope[Any]]) -> None:
    """Give back the reservations of turns dropped before their judge call ran."""
    for message in messages:
        if message.reservation is not None:
            message.reservation.release()


class JudgedTurn(NamedTuple):
    turn: TurnEvent
    verdict: Verdict


class ProcessingStep(Protocol[T_contra]):
    def submit(self, message: Envelope[T_contra]) -> None:
        """Take the message, or raise MessageRejected if full (the caller retries later)."""
        ...

    def poll(self) -> None:
        """Periodic work (collect finished tasks, retry writes, commit); then poll the next."""
        ...

    def join(self, timeout: float | None = None) -> None:
        """Finish what is held within ``timeout`` seconds (None: no limit), then join the next.

        Work not finished by then is abandoned uncommitted: it is re-read after a restart.
        """
        ...

    def close(self) -> None:
        """Release resources without waiting (arroyo's ``terminate``), after ``join``; then
        close the next step."""
        ...


# The commit step accepts any payload: only the envelope's (tp, offset) matters to it.
DoneStep = ProcessingStep[Any]


class SamplingMetrics(Protocol):
    """What the sample and screen steps record of every consumed turn (``StreamRecorder``)."""

    def record_sampling(self, assistant: str, decision: SampleDecision, count: int = 1) -> None: ...

    def record_tripwire(
        self,
        assistant: str,
        checked: int,
        mismatches: Iterable[tuple[str, int]] = (),
        truncated: int = 0,
    ) -> None: ...

    def record_cheap_look(self, assistant: str, cell: str, count: int) -> None: ...


class SavedBatch(Protocol):
    """What storing a batch did: verdicts new to the store, and the pairs the database refused
    on their own (every other pair was stored)."""

    @property
    def inserted(self) -> int: ...

    @property
    def refused(self) -> Sequence[Refused[tuple[TurnEvent, Verdict]]]: ...


class VerdictWriter(Protocol):
    """Where judged turns are stored (the store, or the redacting writer in front of it)."""

    def save_batch(self, items: Sequence[tuple[TurnEvent, Verdict]]) -> SavedBatch: ...


def forward(ready: deque[Envelope[T]], next_step: ProcessingStep[T]) -> None:
    """Offer ``ready`` to ``next_step`` in order until it refuses one; what it refused stays
    at the head of ``ready``, offered again on the next poll (backpressure, order kept)."""
    submit = next_step.submit
    while ready:
        try:
            submit(ready[0])
        except MessageRejected:
            return
        ready.popleft()


def dead_letter(
    dlq: DeadLetterSink,
    record: Callable[[str], None],
    message: Envelope[RawMessage],
    exc: InvalidEvent,
    what: str = "record",
    *,
    wait_s: None = None,
) -> Delivery:
    """Send ``message`` to the dead-letter sink with the reason, count it and log it, without
    waiting: the caller finishes the record once its delivery is acknowledged
    (``PendingDeadLetters``, the one way a step dead-letters). A sink that refuses it raises
    MessageRejected: the record stays offered and is retried.

    ``wait_s`` is accepted as None only, for callers that still spell it: no sender waits for
    its dead letter on the consumer's thread."""
    try:
        delivery = dlq.send(message.payload, exc.reason, exc.detail)
    except TransportError as err:
        _log.warning("dead-letter queue refused a record; will retry", error=str(err))
        raise MessageRejected("dead-letter queue unavailable") from err
    record(exc.reason)
    # A file's records are lines, counted from 1 as an editor counts them; offsets from 0.
    where: dict[str, int] = (
        {"line": message.offset + 1}
        if message.tp == FILE_TP
        else {"partition": message.tp.partition, "offset": message.offset}
    )
    _log.info(f"{what} dead-lettered", topic=message.tp.topic, reason=exc.reason, **where)
    return delivery


# Why a dead-lettered record is held uncommitted (casewatch_dead_letters_held_total{why}).
HELD_REFUSED = "refused"  # the sink failed the write: the record is sent again
HELD_UNAVAILABLE = "unavailable"  # the sink did not take the record: offered again later
HELD_UNACKNOWLEDGED = "unacknowledged"  # still in flight when the join's flush ended
HELD_BACKLOG = "backlog"  # the bound of dead letters awaiting acknowledgement is reached


# Past either, the step rejects poison until dead letters are acknowledged: a burst goes out
# together, and the records kept to be sent again (up to max_message_bytes each) stay bounded
# while the dead-letter topic does not answer.
MAX_PENDING_DEAD_LETTERS = 1000
MAX_PENDING_DEAD_LETTER_BYTES = 32 << 20


def _size(message: Envelope[RawMessage]) -> int:
    raw = message.payload
    return len(raw.value or b"") + len(raw.key or b"")


class _Pending(NamedTuple):
    message: Envelope[RawMessage]  # the record sent
    exc: InvalidEvent
    delivery: Delivery | None  # None: to be sent again
    finishes: Envelope[Any]  # handed to ``done`` once acknowledged


class PendingDeadLetters:
    """Dead letters sent and not yet acknowledged, each with the message it finishes: the one
    way every step dead-letters (decode, assemble, redact, store, outcome).

    The sink writes in the background; ``settle`` (each poll, never waiting) hands the
    messages whose dead letter is acknowledged to ``done`` and sends again those whose write
    failed, so a dead-lettered offset is committable only once its dead letter is durable.
    ``make_room`` is the bound past which the step takes no more poison (backpressure);
    ``flush`` (the join) waits once for everything in flight. ``held(why)`` counts what stays
    held.
    """

    def __init__(
        self,
        dlq: DeadLetterSink,
        done: DoneStep,
        held: Callable[[str], None],
        limit: int = MAX_PENDING_DEAD_LETTERS,
        byte_limit: int = MAX_PENDING_DEAD_LETTER_BYTES,
    ) -> None:
        if limit < 1 or byte_limit < 1:
            raise ValueError(f"dead letters awaiting acknowledgement: {limit}, {byte_limit} B")
        self._dlq = dlq
        self._done = done
        self._held = held
        self._limit = limit
        self._byte_limit = byte_limit
        self._pending: list[_Pending] = []
        self._bytes = 0  # of the records held (each is kept to be sent again)
        self._backlogged = False

    def __len__(self) -> int:
        return len(self._pending)

    def send(
        self,
        message: Envelope[RawMessage],
        exc: InvalidEvent,
        record: Callable[[str], None],
        what: str = "record",
        *,
        finishes: Envelope[Any] | None = None,
    ) -> None:
        """Dead-letter ``message`` (``dead_letter``) without waiting, to be finished once
        acknowledged. MessageRejected when full or when the sink refuses it. ``finishes``: the
        message handed to ``done`` then, when it is not the record sent (a decoded turn sent
        re-serialized goes on as the turn)."""
        self.make_room()
        try:
            delivery = dead_letter(self._dlq, record, message, exc, what)
        except MessageRejected:
            self._held(HELD_UNAVAILABLE)
            raise
        self.add(message, exc, delivery, finishes=finishes)

    def add(
        self,
        message: Envelope[RawMessage],
        exc: InvalidEvent,
        delivery: Delivery,
        *,
        finishes: Envelope[Any] | None = None,
    ) -> None:
        self._pending.append(
            _Pending(message, exc, delivery, message if finishes is None else finishes)
        )
        self._bytes += _size(message)

    def _full(self) -> bool:
        # One record is always taken, however large: it is at most max_message_bytes.
        return bool(self._pending) and (
            len(self._pending) >= self._limit or self._bytes >= self._byte_limit
        )

    def make_room(self) -> None:
        """Raise MessageRejected while ``limit`` dead letters (or ``byte_limit`` bytes of their
        records) await acknowledgement."""
        if self._full():
            self.settle()
        if not self._full():
            self._backlogged = False
            return
        if not self._backlogged:  # counted and said once per episode, not per offer
            self._backlogged = True
            self._held(HELD_BACKLOG)
            _log.warning(
                "dead letters await acknowledgement; intake waits",
                pending=len(self._pending),
                limit=self._limit,
            )
        raise MessageRejected("dead letters await acknowledgement")

    def settle(self) -> None:
        still: list[_Pending] = []
        for entry in self._pending:
            if entry.delivery is not None:
                try:
                    if not entry.delivery.acknowledged():
                        still.append(entry)
                        continue
                except TransportError as err:
                    self._held(HELD_REFUSED)
                    _log.warning(
                        "dead letter not written; sending it again",
                        topic=entry.message.tp.topic,
                        partition=entry.message.tp.partition,
                        offset=entry.message.offset,
                        error=str(err),
                    )
                    entry = entry._replace(delivery=None)
                else:
                    self._done.submit(entry.finishes)
                    self._bytes -= _size(entry.message)
                    continue
            still.append(self._resend(entry))
        self._pending = still

    def _resend(self, entry: _Pending) -> _Pending:
        try:
            delivery = self._dlq.send(entry.message.payload, entry.exc.reason, entry.exc.detail)
        except TransportError as err:
            self._held(HELD_UNAVAILABLE)
            _log.warning("dead-letter queue refused a record; will retry", error=str(err))
            return entry
        return entry._replace(delivery=delivery)

    def flush(self, timeout: float) -> bool:
        """Wait (once, at most ``timeout``) for the dead letters in flight; True when none is
        left awaiting acknowledgement."""
        if not self._pending:
            return True
        error: str | None = None
        try:
            self._dlq.flush(timeout)
        except TransportError as err:  # which writes failed is settled below, per record
            error = str(err)
        self.settle()
        if self._pending:
            self._held(HELD_UNACKNOWLEDGED)
            _log.warning(
                "dead letters not acknowledged; their records stay uncommitted",
                pending=len(self._pending),
                error=error,
            )
        return not self._pending


def turn_record(message: Envelope[TurnEvent] | Envelope[JudgedTurn]) -> RawMessage:
    """A decoded turn as a record for a dead-letter sink. The original bytes are gone by then,
    so the value is the turn re-serialized (unknown producer fields included), which
    ``casewatch replay`` can publish again once the data is fixed."""
    payload = message.payload
    turn = payload.turn if isinstance(payload, JudgedTurn) else payload
    value = turn.model_dump_json().encode()
    return RawMessage(message.tp.topic, message.tp.partition, message.offset, value)
