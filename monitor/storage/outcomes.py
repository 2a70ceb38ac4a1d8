"""Outcome events in SQL: stored once per outcome id, joined to stored turns, paired with
verdicts (the outcome step's writes, the outcome join job's reads and writes, ``inspect``).

Either side may come first. ``save`` inserts (``ON CONFLICT DO NOTHING`` on ``outcome_id``: a
replayed or duplicated event is a no-op, reported as a duplicate) and marks joined at once the
new outcomes whose turn (feedback: ``turn_event_id``) or case (``conversation_id``) is stored,
judged or retained unsampled. ``join_pending`` (the job) marks joined those whose turn came
later, within the join window, and expired those the window passed. ``pair_feedback`` compares
joined feedback with its turn's newest ok verdict, once per outcome (``paired_at``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from monitor.runtime.clock import Clock, SystemClock
from monitor.schema.outcome import OutcomeEvent
from monitor.schema.turn import TurnEvent, Verdict
from monitor.stats.judge_user_agreement import cell
from monitor.storage.refusals import Refused, write_isolating
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


def judged_for_feedback(event_id: sa.ColumnElement[Any]) -> sa.ColumnElement[bool]:
    """SQL: the turn ``event_id`` was judged because a user complained (sampling reason
    ``feedback``), not drawn at random. Its kept row stays, marked, while the turn is stored
    (``prune_retained``), so every read of the random sample can leave it out with
    ``~judged_for_feedback(turns.c.event_id)``."""
    r = retained_turns.c
    return sa.exists().where(r.event_id == event_id, r.feedback_judged_at.is_not(None))


_RETAIN_COLUMNS = ("event_id", "conversation_id", "assistant_name", "event", "retained_at")
_PLACE_COLUMNS = (  # in the table's order, which SQLite's positional parameters follow
    "event_id",
    "conversation_id",
    "assistant_name",
    "event",
    "retained_at",
    "source_topic",
    "source_partition",
    "source_offset",
)

# (event id, conversation id, assistant, topic, partition, offset): an unsampled turn kept as
# the place of its Kafka record.
RetainedPlace = tuple[str, str, str, str, int, int]


@dataclass(frozen=True)
class KeptTurn:
    """A kept turn to judge: its redacted event as JSON text, or, kept as its record's place
    (``event`` empty), where to read it back."""

    event_id: str
    event: str
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


def _retain_rows(
    store: Store,
    dialect: sa.Dialect,
    rows: Sequence[tuple[Any, ...]],
    now: datetime,
) -> tuple[str, list[Any]]:
    """The kept-turn upsert compiled to the driver's SQL, and ``rows`` with ``now`` as the
    driver's parameters (positional or named, as the dialect's paramstyle has them); the one
    timestamp goes through its column type's processing once."""
    stmt = store.upsert(retained_turns, ["event_id"])
    compiled = stmt.compile(dialect=dialect, column_keys=list(_RETAIN_COLUMNS))
    process = retained_turns.c.retained_at.type.dialect_impl(dialect).bind_processor(dialect)
    at = process(now) if process is not None else now
    if compiled.positiontup is None:  # named (psycopg)
        return str(compiled), [dict(zip(_RETAIN_COLUMNS, (*row, at), strict=True)) for row in rows]
    order = [compiled.bind_names[compiled.binds[name]] for name in compiled.positiontup]
    if order == list(_RETAIN_COLUMNS):  # positional in column order (SQLite): no reordering
        return str(compiled), [(*row, at) for row in rows]
    where = [_RETAIN_COLUMNS.index(key) for key in order]
    return str(compiled), [tuple((*row, at)[i] for i in where) for row in rows]


PLACES_PER_STATEMENT = 100  # 8 parameters a row


def _place_statements(
    store: Store, dialect: sa.Dialect, places: Iterable[RetainedPlace], now: datetime
) -> list[tuple[str, Any]]:
    """The statements keeping turns as their records' places (an empty ``event``), with their
    driver parameters. On SQLite, one multi-row insert per ``PLACES_PER_STATEMENT``: sqlite3's
    ``executemany`` lets go of the GIL around every row, and on the daemon's writer thread each
    took it back from the consumer's thread (~6.5 us of CPU a row against ~3.4 this way,
    ``bench/ingest_profile.py --outcomes``). Elsewhere one ``executemany``."""
    stmt = store.upsert(retained_turns, ["event_id"])
    compiled = stmt.compile(dialect=dialect, column_keys=list(_PLACE_COLUMNS))
    process = retained_turns.c.retained_at.type.dialect_impl(dialect).bind_processor(dialect)
    at = process(now) if process is not None else now
    rows: list[tuple[Any, ...]] = [(e, c, a, "", at, t, p, o) for e, c, a, t, p, o in places]
    sql = str(compiled)
    if compiled.positiontup is None:  # named (psycopg)
        return [(sql, [dict(zip(_PLACE_COLUMNS, row, strict=True)) for row in rows])]
    order = [compiled.bind_names[compiled.binds[name]] for name in compiled.positiontup]
    if order != list(_PLACE_COLUMNS):
        where = [_PLACE_COLUMNS.index(key) for key in order]
        rows = [tuple(row[i] for i in where) for row in rows]
    if dialect.paramstyle != "qmark":
        return [(sql, rows)]
    head, tail = sql[: sql.index(" VALUES (")], sql[sql.rindex(" ON CONFLICT") :]
    group = "(" + ", ".join(["?"] * len(_PLACE_COLUMNS)) + ")"
    statements: list[tuple[str, Any]] = []
    for start in range(0, len(rows), PLACES_PER_STATEMENT):
        part = rows[start : start + PLACES_PER_STATEMENT]
        values = ", ".join([group] * len(part))
        statements.append((f"{head} VALUES {values}{tail}", tuple(v for r in part for v in r)))
    return statements


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

    # ------------------------------------------------------------ unsampled turns kept

    def retain(
        self,
        items: Sequence[tuple[str, str, str, str]],
        now: datetime | None = None,
        places: Sequence[RetainedPlace] = (),
    ) -> int:
        """Keep unsampled turns ``(event_id, conversation_id, assistant, redacted event as
        JSON text)``, and turns read from Kafka as their record's ``places`` (a turn kept before
        is left alone); returns how many were offered. ``now``: when they were kept (default:
        this store's clock; the keeper process passes the daemon's).

        One ``executemany`` straight to the driver per kind: every row of every turn read goes
        through here, and SQLAlchemy's per-row parameter processing cost as much as SQLite's
        insert itself (``bench/ingest.py --outcomes``). The one timestamp is processed once."""
        if not items and not places:
            return 0
        rows = {item[0]: item for item in items}  # a turn offered twice: kept once
        at_places = {place[0]: place for place in places if place[0] not in rows}
        with self._store.transaction(write=True, action="keeping unsampled turns") as conn:
            at = self._now() if now is None else now
            if rows:
                sql, params = _retain_rows(self._store, conn.dialect, list(rows.values()), at)
                conn.exec_driver_sql(sql, params)
            if at_places:
                places_sql = _place_statements(self._store, conn.dialect, at_places.values(), at)
                for sql, params in places_sql:
                    conn.exec_driver_sql(sql, params)
        return len(rows) + len(at_places)

    def forget_retained(self, event_id: str) -> None:
        """Forget a kept turn that can no longer be judged (its record gone from Kafka)."""
        r = retained_turns.c
        with self._store.transaction(write=True, action="forgetting an unsampled turn") as conn:
            conn.execute(
                sa.delete(retained_turns).where(
                    r.event_id == event_id, r.feedback_judged_at.is_(None)
                )
            )

    def prune_retained(self, max_age_s: float, max_rows: int) -> int:
        """Forget kept turns older than ``max_age_s`` and, past ``max_rows``, the oldest; a turn
        judged for feedback is forgotten once its stored turn is (retention)."""
        r = retained_turns.c
        cutoff = self._now() - timedelta(seconds=max_age_s)
        waiting = r.feedback_judged_at.is_(None)
        # A turn judged for feedback keeps its marked row (its text dropped) while the turn is
        # stored: the mark is what keeps it out of the random sample's reads.
        gone = sa.and_(
            r.feedback_judged_at.is_not(None),
            ~sa.exists().where(turns.c.event_id == r.event_id),
        )
        with self._store.transaction(write=True, action="pruning unsampled turns") as conn:
            old = sa.and_(waiting, r.retained_at < cutoff)
            deleted = conn.execute(sa.delete(retained_turns).where(sa.or_(old, gone))).rowcount
            count = int(
                conn.scalar(sa.select(sa.func.count()).select_from(retained_turns).where(waiting))
                or 0
            )
            if count > max_rows:
                oldest = (
                    sa.select(r.event_id)
                    .where(waiting)
                    .order_by(r.retained_at, r.event_id)
                    .limit(count - max_rows)
                    .scalar_subquery()
                )
                deleted += conn.execute(
                    sa.delete(retained_turns).where(r.event_id.in_(oldest))
                ).rowcount
        return int(deleted or 0)

    def feedback_to_judge(self, limit: int) -> list[KeptTurn]:
        """Kept turns with negative feedback, never judged (neither sampled nor judged for
        feedback), oldest first: their redacted events as JSON text, or their records'
        places."""
        r = retained_turns.c
        o = outcome_events.c
        negative = sa.exists().where(
            o.turn_event_id == r.event_id, o.kind == "feedback", o.polarity == "negative"
        )
        judged = sa.exists().where(verdicts.c.event_id == r.event_id)
        query = (
            sa.select(r.event_id, r.event, r.source_topic, r.source_partition, r.source_offset)
            .where(r.feedback_judged_at.is_(None), negative, ~judged)
            .order_by(r.retained_at, r.event_id)
            .limit(limit)
        )
        with self._store.transaction(write=False, action="reading turns to judge") as conn:
            return [
                KeptTurn(
                    str(row.event_id),
                    str(row.event or ""),
                    row.source_topic,
                    None if row.source_partition is None else int(row.source_partition),
                    None if row.source_offset is None else int(row.source_offset),
                )
                for row in conn.execute(query)
            ]

    def save_feedback_verdict(self, turn: TurnEvent, verdict: Verdict) -> None:
        """Store the verdict of a turn judged for its feedback and mark the turn judged, in one
        transaction (``mark_judged``). A reader never sees the verdict without its mark (it
        would count once in drift, detection and labels), nor the mark without the verdict; a
        failure stores neither."""
        event_id, config_hash = turn.event_id, verdict.judge_config_hash
        self._store.save_with(
            turn, verdict, lambda conn, now: mark_judged(conn, event_id, config_hash, now)
        )


def mark_judged(conn: Connection, event_id: str, config_hash: str, now: datetime) -> None:
    """In the transaction storing its verdict: the turn was judged for its feedback, never again
    (its kept row marked, its text dropped), and its verdict is marked observed so the
    sequential detectors (which read only unobserved verdicts) leave it out of the random
    sample's rates."""
    conn.execute(
        sa.update(retained_turns)
        .where(retained_turns.c.event_id == event_id)
        .values(feedback_judged_at=now, event="")
    )
    v = verdicts.c
    conn.execute(
        sa.update(verdicts)
        .where(v.event_id == event_id, v.judge_config_hash == config_hash)
        .values(observed_at=now)
    )
