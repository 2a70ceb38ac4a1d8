"""Outcome events in SQL: stored once per outcome id, joined to stored turns, paired with
verdicts (the outcome step's writes, the outcome join job's reads and writes, ``inspect``).

Either side may come first. ``save`` inserts (``ON CONFLICT DO NOTHING`` on ``outcome_id``: a
replayed or duplicated event is a no-op, reported as a duplicate) and marks joined at once the
new outcomes whose turn (feedback: ``turn_event_id``) or case (``conversation_id``) is stored,
judged or kept unsampled. ``join_pending`` (the job) marks joined those whose turn came
later, within the join window, and expired those the window passed. An unsampled turn kept as
its Kafka record's place, a batch at a time, is found by ``join_pending`` only
(``retained_turns.find_places``): its outcomes count as joined later, never on arrival.
``pair_feedback`` compares joined feedback with its turn's newest ok verdict, once per outcome
(``paired_at``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from monitor.runtime.clock import Clock, SystemClock
from monitor.schema.outcome import OutcomeEvent
from monitor.stats.judge_user_agreement import cell
from monitor.storage.refusals import Refused, write_isolating
from monitor.storage.retained_turns import find_places
from monitor.storage.store import IN_CHUNK, Store
from monitor.storage.tables import outcome_events, retained_turns, turns, verdicts


@dataclass(frozen=True)
class SavedOutcome:
    """One outcome new to the store, and whether its turn or case was already there."""

    event: OutcomeEvent
    joined: bool


@dataclass(frozen=True)
class SaveOutcomes:
    inserted: list[SavedOutcome]
    duplicates: int
    refused: list[Refused[tuple[OutcomeEvent, str | None]]]


@dataclass(frozen=True)
class Pair:
    """One feedback compared with the judge's band of its turn."""

    assistant: str
    agreement: str


@dataclass(frozen=True)
class Joins:
    joined: int
    expired: int


def _has_turn() -> Any:
    """SQL: the outcome's turn (feedback) or a turn of its case is stored or retained."""
    o = outcome_events.c
    by_turn = sa.or_(
        sa.exists().where(turns.c.event_id == o.turn_event_id),
        sa.exists().where(retained_turns.c.event_id == o.turn_event_id),
    )
    by_case = sa.or_(
        sa.exists().where(turns.c.conversation_id == o.conversation_id),
        sa.exists().where(retained_turns.c.conversation_id == o.conversation_id),
    )
    return sa.case((o.kind == "feedback", by_turn), else_=by_case)


ROWS_PER_INSERT = 500  # 14 parameters a row: far below SQLite's and PostgreSQL's bounds
_OUTCOME_COLUMNS = (
    "outcome_id",
    "kind",
    "signal_kind",
    "assistant_name",
    "turn_event_id",
    "conversation_id",
    "polarity",
    "thumbs",
    "rating",
    "scale_min",
    "scale_max",
    "comment",
    "event_timestamp",
    "received_at",
)


_COMPILED: dict[str, tuple[str, str, str, Any]] = {}


def _outcome_insert(store: Store, dialect: sa.Dialect) -> tuple[str, str, str, Any]:
    """The outcome insert's text before and after its VALUES, one row's placeholders and the
    timestamps' bind processor, compiled once per dialect (a compile per batch cost as much as
    the batch's rows)."""
    got = _COMPILED.get(dialect.name)
    if got is None:
        stmt = store.upsert(outcome_events, ["outcome_id"]).returning(outcome_events.c.outcome_id)
        text = str(stmt.compile(dialect=dialect, column_keys=list(_OUTCOME_COLUMNS)))
        head = text[: text.index(" VALUES (")]
        tail = text[text.rindex(" ON CONFLICT") :]
        if not head.endswith("(" + ", ".join(_OUTCOME_COLUMNS) + ")"):  # pragma: no cover
            raise TypeError(f"unexpected outcome insert: {text}")  # not a row's refusal
        mark = "?" if dialect.paramstyle == "qmark" else "%s"
        group = "(" + ", ".join([mark] * len(_OUTCOME_COLUMNS)) + ")"
        column = outcome_events.c.received_at.type
        got = _COMPILED[dialect.name] = (
            head,
            group,
            tail,
            column.dialect_impl(dialect).bind_processor(dialect),
        )
    return got


def _insert_outcomes(
    store: Store,
    dialect: sa.Dialect,
    batch: Sequence[tuple[OutcomeEvent, str | None]],
    now: datetime,
) -> tuple[str, tuple[Any, ...]]:
    """One multi-row ``INSERT ... ON CONFLICT (outcome_id) DO NOTHING RETURNING outcome_id``
    of ``batch`` in the driver's SQL, and its positional parameters: what SQLAlchemy's
    ``insertmanyvalues`` sends, without its processing of every parameter of every row, which
    cost ~40 us an event on the writer thread, holding the GIL the consumer's thread needs
    (``bench/ingest.py --outcomes``). Only the timestamps need their column type's processing,
    done once per distinct value; RETURNING names exactly the outcomes new to the store."""
    head, group, tail, process = _outcome_insert(store, dialect)
    seen: dict[datetime, Any] = {}

    def at(value: datetime) -> Any:
        done = seen.get(value)
        if done is None:
            done = seen[value] = process(value) if process is not None else value
        return done

    received = at(now)
    params: list[Any] = []
    for event, comment in batch:
        rating = event.rating
        params += (
            event.outcome_id,
            event.kind,
            event.signal_kind,
            event.assistant,
            event.turn_event_id,
            event.conversation_id,
            event.polarity,
            event.thumbs,
            rating.value if rating else None,
            rating.scale_min if rating else None,
            rating.scale_max if rating else None,
            comment,
            at(event.timestamp),
            received,
        )
    return f"{head} VALUES {', '.join([group] * len(batch))}{tail}", tuple(params)


class OutcomeRecords:
    def __init__(self, store: Store, clock: Clock | None = None) -> None:
        self._store = store
        self._clock = clock or SystemClock()

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock.time(), tz=UTC)

    def save(self, items: Sequence[tuple[OutcomeEvent, str | None]]) -> SaveOutcomes:
        """Store ``(event, redacted comment)`` pairs once per outcome id; the new ones come back
        with whether their turn or case is already stored. A row the database refuses on its own
        comes back in ``refused``; unavailability raises ``StorageError``."""
        unique: dict[str, tuple[OutcomeEvent, str | None]] = {}
        for event, comment in items:
            unique.setdefault(event.outcome_id, (event, comment))
        ordered = [unique[k] for k in sorted(unique)]
        if not ordered:
            return SaveOutcomes([], len(items), [])
        results, refused = write_isolating(ordered, self._write)
        inserted = [saved for part in results for saved in part]
        duplicates = len(items) - len(inserted) - len(refused)
        return SaveOutcomes(inserted, duplicates, refused)

    def _write(self, batch: Sequence[tuple[OutcomeEvent, str | None]]) -> list[SavedOutcome]:
        now = self._now()
        by_id = {event.outcome_id: event for event, _ in batch}
        o = outcome_events.c
        with self._store.transaction(write=True, action="saving outcome events") as conn:
            new: set[str] = set()
            for start in range(0, len(batch), ROWS_PER_INSERT):
                part = batch[start : start + ROWS_PER_INSERT]
                sql, params = _insert_outcomes(self._store, conn.dialect, part, now)
                new.update(row[0] for row in conn.exec_driver_sql(sql, params))
            joined: set[str] = set()
            ids = sorted(new)
            for start in range(0, len(ids), IN_CHUNK):
                chunk = ids[start : start + IN_CHUNK]
                joined.update(
                    conn.scalars(
                        sa.update(outcome_events)
                        .where(o.outcome_id.in_(chunk), _has_turn())
                        .values(joined_at=now)
                        .returning(o.outcome_id)
                    )
                )
        return [SavedOutcome(by_id[i], i in joined) for i in ids]

    def join_pending(self, window_s: float) -> Joins:
        """Join the outcomes whose turn or case was stored since they came (within the window);
        expire those the window passed without one."""
        now = self._now()
        since = now - timedelta(seconds=window_s)
        o = outcome_events.c
        waiting = sa.and_(o.joined_at.is_(None), o.expired_at.is_(None))
        with self._store.transaction(write=True, action="joining outcome events") as conn:
            # Turns kept a batch at a time are found only when an outcome asks for them.
            asking = sa.and_(waiting, o.received_at >= since, ~_has_turn())
            turn_ids = set(
                conn.scalars(
                    sa.select(o.turn_event_id)
                    .where(asking, o.kind == "feedback", o.turn_event_id.is_not(None))
                    .distinct()
                )
            )
            cases = set(
                conn.scalars(
                    sa.select(o.conversation_id)
                    .where(asking, o.kind != "feedback", o.conversation_id.is_not(None))
                    .distinct()
                )
            )
            find_places(conn, self._store, turn_ids, cases)
            joined = conn.execute(
                sa.update(outcome_events)
                .where(waiting, o.received_at >= since, _has_turn())
                .values(joined_at=now)
            ).rowcount
            expired = conn.execute(
                sa.update(outcome_events)
                .where(waiting, o.received_at < since)
                .values(expired_at=now)
            ).rowcount
        return Joins(int(joined or 0), int(expired or 0))

    def pending(self) -> int:
        """Outcomes waiting for their turn or case within the window."""
        o = outcome_events.c
        query = sa.select(sa.func.count()).where(o.joined_at.is_(None), o.expired_at.is_(None))
        with self._store.transaction(write=False, action="counting pending outcomes") as conn:
            return int(conn.scalar(query) or 0)

    def pair_feedback(self, limit: int = 1000) -> list[Pair]:
        """Compare joined, unpaired feedback with its turn's newest ok verdict (oldest first, at
        most ``limit``), marking each paired once; feedback whose turn has no ok verdict yet
        stays unpaired."""
        now = self._now()
        o = outcome_events.c
        v = verdicts.c
        newest = (
            sa.select(v.event_id, sa.func.max(v.id).label("id"))
            .where(v.status == "ok", v.turn_band.is_not(None))
            .group_by(v.event_id)
            .subquery()
        )
        query = (
            sa.select(o.outcome_id, o.assistant_name, o.polarity, v.turn_band)
            .join(newest, newest.c.event_id == o.turn_event_id)
            .join(verdicts, v.id == newest.c.id)
            .where(
                o.kind == "feedback",
                o.joined_at.is_not(None),
                o.paired_at.is_(None),
                o.polarity.is_not(None),
            )
            .order_by(o.received_at, o.outcome_id)
            .limit(limit)
        )
        pairs: list[Pair] = []
        with self._store.transaction(write=True, action="pairing feedback with verdicts") as conn:
            for row in conn.execute(query).all():
                agreement = cell(row.turn_band, row.polarity)
                conn.execute(
                    sa.update(outcome_events)
                    .where(o.outcome_id == row.outcome_id, o.paired_at.is_(None))
                    .values(paired_at=now, agreement=agreement)
                )
                pairs.append(Pair(row.assistant_name, agreement))
        return pairs

    def for_turn(self, event_id: str, conversation_id: str | None = None) -> list[dict[str, Any]]:
        """The outcomes of one turn (and of its case), oldest first, for ``inspect turn``."""
        o = outcome_events.c
        keyed = o.turn_event_id == event_id
        if conversation_id is not None:
            keyed = sa.or_(
                keyed, sa.and_(o.kind != "feedback", o.conversation_id == conversation_id)
            )
        query = sa.select(outcome_events).where(keyed).order_by(o.event_timestamp, o.outcome_id)
        with self._store.transaction(write=False, action="reading outcomes") as conn:
            return [dict(row._mapping) for row in conn.execute(query)]
