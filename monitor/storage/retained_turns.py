"""Unsampled turns kept in SQL for their feedback (``outcomes.retain_unsampled``): written by the
pipeline's keeper (``stream/steps/retain.py``), found by the outcome join, judged once by the
feedback judging job, pruned by age and count.

A turn is kept one of two ways:

- as a row of ``retained_turns`` with its redacted event as JSON text (turns off Kafka, and
  turns redaction changed);
- read from Kafka, as its record's place, a batch at a time: one row of ``retained_places`` per
  partition per batch the keeper took, the turns' event ids, conversation ids, assistants and
  offsets as JSON lists. Nothing of a turn's text is written, and one row carries hundreds of
  turns: a row per turn read cost intake a third of its rate (``bench/ingest.py --outcomes``).
  Only when an outcome asks for such a turn (its feedback) or its case does the outcome join
  find it (``find_places``) and copy it into ``retained_turns`` as a place (``event`` empty,
  ``source_*`` set), where everything else (the judging job, the read back from Kafka, the
  marks) finds it as any kept turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from monitor.runtime.clock import Clock, SystemClock
from monitor.schema.turn import TurnEvent, Verdict
from monitor.storage.store import Store
from monitor.storage.tables import (
    outcome_events,
    retained_places,
    retained_turns,
    turns,
    verdicts,
)

# (event id, conversation id, assistant, the redacted turn as JSON text)
RetainedRow = tuple[str, str, str, str]


@dataclass(frozen=True)
class PlaceBatch:
    """Unsampled turns of one partition, kept as their records' places: the lists in step, one
    entry a turn."""

    topic: str
    partition: int
    event_ids: Sequence[str]
    conversation_ids: Sequence[str]
    assistants: Sequence[str]
    offsets: Sequence[int]


@dataclass(frozen=True)
class KeptTurn:
    """A kept turn to judge: its redacted event as JSON text, or, kept as its record's place
    (``event`` empty), where to read it back."""

    event_id: str
    event: str
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


def judged_for_feedback(event_id: sa.ColumnElement[Any]) -> sa.ColumnElement[bool]:
    """SQL: the turn ``event_id`` was judged because a user complained (sampling reason
    ``feedback``), not drawn at random. Its kept row stays, marked, while the turn is stored
    (``RetainedTurns.prune``), so every read of the random sample can leave it out with
    ``~judged_for_feedback(turns.c.event_id)``."""
    r = retained_turns.c
    return sa.exists().where(r.event_id == event_id, r.feedback_judged_at.is_not(None))


_RETAIN_COLUMNS = ("event_id", "conversation_id", "assistant_name", "event", "retained_at")
# A kept turn found among the batches of places: where to read it back from too.
_PLACE_COLUMNS = (*_RETAIN_COLUMNS, "source_topic", "source_partition", "source_offset")


def _upsert_rows(
    store: Store,
    dialect: sa.Dialect,
    columns: tuple[str, ...],
    rows: Sequence[tuple[Any, ...]],
) -> tuple[str, list[Any]]:
    """The kept-turn upsert of ``columns`` compiled to the driver's SQL, and ``rows`` (values
    in ``columns``' order, already as the driver takes them) as its parameters, positional or
    named as the dialect's paramstyle has them.

    Rows go as one ``executemany`` straight to the driver: SQLAlchemy's per-row parameter
    processing cost as much as SQLite's insert itself where every kept turn goes through here,
    and two thirds of the outcome join's time where it copies the turns outcomes ask for."""
    stmt = store.upsert(retained_turns, ["event_id"])
    compiled = stmt.compile(dialect=dialect, column_keys=list(columns))
    if compiled.positiontup is None:  # named (psycopg)
        return str(compiled), [dict(zip(columns, row, strict=True)) for row in rows]
    order = [compiled.bind_names[compiled.binds[name]] for name in compiled.positiontup]
    if order == list(columns):  # positional in column order (SQLite): no reordering
        return str(compiled), list(rows)
    where = [columns.index(key) for key in order]
    return str(compiled), [tuple(row[i] for i in where) for row in rows]


def _timestamp(dialect: sa.Dialect) -> Callable[[datetime], Any]:
    """``retained_at`` as the driver takes it (its column type's processing, done once a value
    instead of once a row)."""
    process = retained_turns.c.retained_at.type.dialect_impl(dialect).bind_processor(dialect)
    return process if process is not None else (lambda at: at)


def _retain_rows(
    store: Store,
    dialect: sa.Dialect,
    rows: Sequence[tuple[Any, ...]],
    now: datetime,
) -> tuple[str, list[Any]]:
    """The kept-turn upsert for ``rows`` kept ``now`` (``_upsert_rows``)."""
    at = _timestamp(dialect)(now)
    return _upsert_rows(store, dialect, _RETAIN_COLUMNS, [(*row, at) for row in rows])


def find_places(
    conn: Connection, store: Store, turn_ids: set[str], conversation_ids: set[str]
) -> int:
    """Copy into ``retained_turns``, as places, the turns kept a batch at a time whose event id
    is in ``turn_ids`` or whose conversation is in ``conversation_ids`` (an outcome asks for
    them); returns how many. Each keeps when its batch was kept, so it is pruned as it would
    have been; a turn kept twice (read again after a rebalance) is copied once, from its oldest
    batch. Reads every batch kept: the outcome join runs it only while outcomes wait, and a
    batch of 500 turns decodes in well under a millisecond."""
    if not turn_ids and not conversation_ids:
        return 0
    p = retained_places.c
    columns = [p.id, p.source_topic, p.source_partition, p.retained_at, p.event_ids]
    if conversation_ids:
        columns.append(p.conversation_ids)
    found: dict[str, tuple[Any, ...]] = {}
    timestamp = _timestamp(conn.dialect)
    for row in conn.execute(sa.select(*columns).order_by(p.id)):
        ids: list[str] = json.loads(row.event_ids)
        hits: list[int] = []
        if turn_ids and not turn_ids.isdisjoint(ids):
            hits = [i for i, e in enumerate(ids) if e in turn_ids]
        convs: list[str] | None = None
        if conversation_ids:
            convs = json.loads(row.conversation_ids)
            if not conversation_ids.isdisjoint(convs):
                hits += [i for i, c in enumerate(convs) if c in conversation_ids]
        if not hits:
            continue
        # The rest of a batch only where it holds a turn asked for: most hold none.
        rest = conn.execute(
            sa.select(p.conversation_ids, p.assistants, p.offsets).where(p.id == row.id)
        ).first()
        if rest is None:  # pragma: no cover - the row was read in this transaction
            continue
        convs = json.loads(rest.conversation_ids)
        assistants: list[str] = json.loads(rest.assistants)
        offsets: list[int] = json.loads(rest.offsets)
        at = timestamp(row.retained_at)
        topic, partition = row.source_topic, row.source_partition
        for i in hits:
            event_id = ids[i]
            if event_id not in found:
                found[event_id] = (event_id, convs[i], assistants[i], "", at, topic, partition,
                                   offsets[i])  # fmt: skip
    if found:
        sql, params = _upsert_rows(store, conn.dialect, _PLACE_COLUMNS, list(found.values()))
        conn.exec_driver_sql(sql, params)
    return len(found)


class RetainedTurns:
    """The kept turns of one store: kept, pruned, read for judging, marked judged."""

    def __init__(self, store: Store, clock: Clock | None = None) -> None:
        self._store = store
        self._clock = clock or SystemClock()

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock.time(), tz=UTC)

    def retain(
        self,
        items: Sequence[RetainedRow],
        now: datetime | None = None,
        places: Sequence[PlaceBatch] = (),
    ) -> int:
        """Keep unsampled turns ``(event_id, conversation_id, assistant, redacted event as
        JSON text)`` (a turn kept before is left alone), and turns read from Kafka as their
        records' ``places``, a row per batch; returns how many turns were offered. ``now``:
        when they were kept (default: this store's clock; the keeper process passes the
        daemon's).

        Rows go as one ``executemany`` straight to the driver: every turn kept goes through
        here, and SQLAlchemy's per-row parameter processing cost as much as SQLite's insert
        itself (``bench/ingest.py --outcomes``). The one timestamp is processed once."""
        if not items and not places:
            return 0
        rows = {item[0]: item for item in items}  # a turn offered twice: kept once
        batches = [batch for batch in places if batch.event_ids]
        with self._store.transaction(write=True, action="keeping unsampled turns") as conn:
            at = self._now() if now is None else now
            if rows:
                sql, params = _retain_rows(self._store, conn.dialect, list(rows.values()), at)
                conn.exec_driver_sql(sql, params)
            if batches:
                conn.execute(
                    sa.insert(retained_places),
                    [
                        {
                            "source_topic": batch.topic,
                            "source_partition": batch.partition,
                            "turns": len(batch.event_ids),
                            "event_ids": json.dumps(list(batch.event_ids)),
                            "conversation_ids": json.dumps(list(batch.conversation_ids)),
                            "assistants": json.dumps(list(batch.assistants)),
                            "offsets": json.dumps(list(batch.offsets)),
                            "retained_at": at,
                        }
                        for batch in batches
                    ],
                )
        return len(rows) + sum(len(batch.event_ids) for batch in batches)

    def forget(self, event_id: str) -> None:
        """Forget a kept turn that can no longer be judged (its record gone from Kafka)."""
        r = retained_turns.c
        with self._store.transaction(write=True, action="forgetting an unsampled turn") as conn:
            conn.execute(
                sa.delete(retained_turns).where(
                    r.event_id == event_id, r.feedback_judged_at.is_(None)
                )
            )

    def prune(self, max_age_s: float, max_rows: int) -> int:
        """Forget kept turns older than ``max_age_s`` and, past ``max_rows`` turns in all, the
        oldest: batches of places first (oldest batch first, whole), then rows; a turn judged
        for feedback is forgotten once its stored turn is (retention). Returns how many turns
        were forgotten."""
        r = retained_turns.c
        p = retained_places.c
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
            deleted += int(
                conn.scalar(sa.select(sa.func.sum(p.turns)).where(p.retained_at < cutoff)) or 0
            )
            conn.execute(sa.delete(retained_places).where(p.retained_at < cutoff))
            count = int(
                conn.scalar(sa.select(sa.func.count()).select_from(retained_turns).where(waiting))
                or 0
            )
            in_places = int(conn.scalar(sa.select(sa.func.sum(p.turns))) or 0)
            excess = count + in_places - max_rows
            if excess > 0 and in_places:
                oldest: list[int] = []
                for batch_id, size in conn.execute(
                    sa.select(p.id, p.turns).order_by(p.retained_at, p.id)
                ):
                    if excess <= 0:
                        break
                    oldest.append(int(batch_id))
                    excess -= int(size)
                    deleted += int(size)
                for start in range(0, len(oldest), 500):
                    chunk = oldest[start : start + 500]
                    conn.execute(sa.delete(retained_places).where(p.id.in_(chunk)))
            if excess > 0:
                oldest_rows = (
                    sa.select(r.event_id)
                    .where(waiting)
                    .order_by(r.retained_at, r.event_id)
                    .limit(excess)
                    .scalar_subquery()
                )
                deleted += conn.execute(
                    sa.delete(retained_turns).where(r.event_id.in_(oldest_rows))
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
