"""SQL storage of turns, verdicts and judgments (SQLAlchemy 2 Core on SQLite or PostgreSQL).

The store is the daemon's side: the engine (``engine.py``), the schema (``schema.py``), writes
of judged turns, the look-up of existing verdicts and one transaction for other features' SQL.
Retention is ``retention.py``; the reads only tests and people use are ``audit.py``.

Writes are idempotent on ``(event_id, judge_config_hash)``: turns and verdicts go in with
``INSERT ... ON CONFLICT DO NOTHING`` and judgments only for the verdicts this transaction
actually created, so Kafka replays and concurrent replicas never store a verdict twice.
Every SQLAlchemy, DBAPI or Alembic error leaves this module as ``StorageError``; one about the
data of a row (``monitor.storage.refusals``) as ``UnstorableRow``, which is never worth a retry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol

import sqlalchemy as sa
import structlog
from alembic.util.exc import CommandError
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from monitor.config.storage import StorageConfig
from monitor.errors import StorageError, UnstorableRow
from monitor.runtime.clock import Clock, SystemClock
from monitor.schema.turn import Band, TurnEvent, Verdict
from monitor.storage import schema
from monitor.storage.engine import (
    create_engine,
    first_line,
    hint,
    in_memory,
    normalize_url,
    redact_url,
    url_problem,
)
from monitor.storage.refusals import Refused, is_refusal, refusal_message, write_isolating
from monitor.storage.tables import (
    judgment_row,
    judgments,
    turn_row,
    turns,
    verdict_row,
    verdicts,
)

IN_CHUNK = 500  # keeps IN (...) lists far below SQLite's bound-parameter limit
_log = structlog.get_logger(__name__)


Item = tuple[TurnEvent, Verdict]


class SaveResult(NamedTuple):
    """What ``save_batch`` did: verdicts new to the store, and the pairs the database refused
    on their own (every other pair of the batch is stored)."""

    inserted: int
    refused: list[Refused[Item]]


class Draws(Protocol):
    """What a sampler drew each turn with (the cascade), read when the turn's row is written."""

    def of(self, event_id: str) -> tuple[float, str] | None:
        """(inclusion probability, cheap-look cell), or None for a turn not drawn that way."""
        ...

    def stored(self, event_id: str, llm_severe: bool | None) -> None:
        """The turn's rows were written; ``llm_severe``: the verdict's severe call."""
        ...


class Store:
    """Persists verdicts for audit and idempotency. Safe to share between threads."""

    def __init__(
        self,
        url: str,
        *,
        echo: bool = False,
        clock: Clock | None = None,
    ) -> None:
        # The cascade's draws (``sampling.cascade.DrawLedger``), set by whoever samples with
        # it: each new turn row stores its probability and cell from there.
        self.draws: Draws | None = None
        self.url = normalize_url(url)
        self._clock = clock or SystemClock()
        self.last_error: str | None = None  # why the last ping failed, for /readyz
        problem = url_problem(self.url)
        if problem is not None:  # before SQLAlchemy: a missing driver is an ImportError there
            raise StorageError(problem)
        with self._translate("opening the database"):
            self._dialect = sa.make_url(self.url).get_backend_name()
            if self._dialect == "sqlite" and in_memory(self.url):
                # Each pooled connection would get its own private, empty database.
                raise StorageError(
                    "an in-memory SQLite database cannot be shared between connections: "
                    "set storage.url to a file, e.g. sqlite:///casewatch.db"
                )
            self._engine = create_engine(self.url, echo=echo)

    @classmethod
    def from_config(cls, cfg: StorageConfig) -> Store:
        return cls(cfg.url)

    # ------------------------------------------------------------------ plumbing

    @contextmanager
    def _translate(self, action: str) -> Iterator[None]:
        try:
            yield
        except UnstorableRow:
            raise
        except (SQLAlchemyError, CommandError, OverflowError, UnicodeError) as exc:
            if is_refusal(exc):
                # About the row, not the database: storage.url is not the thing to check.
                raise UnstorableRow(f"{action}: {refusal_message(exc)}") from exc
            raise StorageError(
                f"{action} failed on {redact_url(self.url)}: {first_line(exc)} ({hint(exc)})"
            ) from exc

    @contextmanager
    def _tx(self, *, write: bool) -> Iterator[Connection]:
        with self._engine.connect() as conn:
            if write:
                # Read by the SQLite "begin" hook: take the write lock up front (BEGIN IMMEDIATE)
                # so concurrent writers queue on busy_timeout instead of failing mid-transaction.
                conn.execution_options(casewatch_write=True)
            with conn.begin():
                yield conn

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``: SQL modules of other features pick their inserts by it."""
        return self._dialect

    @contextmanager
    def transaction(
        self, *, write: bool, action: str = "a database transaction"
    ) -> Iterator[Connection]:
        """One transaction for the SQL modules of other features (schema, retention, leases,
        drift, matches...). Writers take SQLite's write lock up front, like the store's own
        writes; database errors come out as ``StorageError`` naming ``action``.
        """
        with self._translate(action), self._tx(write=write) as conn:
            yield conn

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock.time(), tz=UTC)

    def upsert(
        self,
        table: sa.Table,
        keys: Sequence[str],
        update: Sequence[str] = (),
        *,
        where: Any = None,
        values: Mapping[str, Any] | None = None,
    ) -> Any:
        """An INSERT into ``table`` that, on a row with the same ``keys``, sets its ``update``
        columns from the row being inserted (where ``where`` holds), or, with no ``update``,
        leaves the existing row alone. The one place the dialect is told apart: PostgreSQL and
        SQLite spell the conflict clause alike, through their own insert constructs.
        ``values``: the one row to insert (else rows go to ``execute``)."""
        stmt: Any = (postgresql.insert if self._dialect == "postgresql" else sqlite.insert)(table)
        if values is not None:
            stmt = stmt.values(**values)
        if not update:
            return stmt.on_conflict_do_nothing(index_elements=list(keys))
        return stmt.on_conflict_do_update(
            index_elements=list(keys), set_={c: stmt.excluded[c] for c in update}, where=where
        )

    # ------------------------------------------------------------------ schema

    def migrate(self, revision: str = "head") -> None:
        """``alembic upgrade`` (``monitor.storage.schema``)."""
        schema.migrate(self, revision)

    def downgrade(self, revision: str = "base") -> None:
        schema.downgrade(self, revision)

    def revision(self) -> str | None:
        return schema.current_revision(self)

    # ------------------------------------------------------------------ writes

    def save(self, turn: TurnEvent, verdict: Verdict) -> bool:
        """Store the turn and its verdict; False if this (event, judge config) was stored before."""
        return self.save_many([(turn, verdict)]) == 1

    def save_many(self, items: Sequence[Item]) -> int:
        """Store a batch; returns how many verdicts were new. Raises ``UnstorableRow`` naming
        the first turn the database refused, after storing every other turn of the batch."""
        result = self.save_batch(items)
        if result.refused:
            first = result.refused[0]
            raise UnstorableRow(first.message, row=first.item[0].event_id)
        return result.inserted

    def save_batch(self, items: Sequence[Item]) -> SaveResult:
        """Store a batch in one transaction. A pair the database refuses (its data, not its
        availability) is isolated by splitting the batch, and returned in ``refused`` with the
        database's message; the others are stored. Unavailability raises ``StorageError``."""
        batch: dict[tuple[str, str], Item] = {}
        for turn, verdict in items:
            if verdict.event_id != turn.event_id:
                raise ValueError(
                    f"verdict for event {verdict.event_id!r} paired with turn {turn.event_id!r}"
                )
            batch.setdefault((turn.event_id, verdict.judge_config_hash), (turn, verdict))
        if not batch:
            return SaveResult(0, [])
        # Sorted so concurrent batches take row locks in one order (no PostgreSQL deadlocks).
        ordered = [batch[k] for k in sorted(batch)]
        with self._translate("saving verdicts"):
            counts, refused = write_isolating(ordered, self._write_batch)
        return SaveResult(sum(counts), refused)

    def save_with(
        self, turn: TurnEvent, verdict: Verdict, also: Callable[[Connection, datetime], None]
    ) -> bool:
        """``save`` one turn and verdict, and run ``also(conn, now)`` in the same transaction:
        a reader sees both writes or neither, and a failure in ``also`` stores nothing.
        False if this (event, judge config) was stored before (``also`` runs all the same)."""
        if verdict.event_id != turn.event_id:
            raise ValueError(
                f"verdict for event {verdict.event_id!r} paired with turn {turn.event_id!r}"
            )
        with self._translate("saving verdicts"):
            return self._write_batch([(turn, verdict)], also) == 1

    def _write_batch(
        self, pairs: Sequence[Item], also: Callable[[Connection, datetime], None] | None = None
    ) -> int:
        now = self._now()
        # A replayed event keeps its first stored copy (ON CONFLICT DO NOTHING on turns too).
        turn_rows = {turn.event_id: turn_row(turn, now) for turn, _ in pairs}
        draws = self.draws
        if draws is not None:  # every row of the batch gets both keys (null: drawn uniformly)
            for event_id, row in turn_rows.items():
                drawn = draws.of(event_id)
                row["inclusion_probability"], row["cheap_cell"] = drawn or (None, None)
        by_key = {(v.event_id, v.judge_config_hash): v for _, v in pairs}
        verdict_rows = [verdict_row(v, now) for _, v in pairs]
        with self._tx(write=True) as conn:
            conn.execute(
                self.upsert(turns, ["event_id"]),
                list(turn_rows.values()),
            )
            inserted = conn.execute(
                self.upsert(verdicts, ["event_id", "judge_config_hash"]).returning(
                    verdicts.c.id, verdicts.c.event_id, verdicts.c.judge_config_hash
                ),
                verdict_rows,
            ).all()
            judgment_rows = [
                judgment_row(j, row.id)
                for row in inserted
                for j in by_key[(row.event_id, row.judge_config_hash)].judgments
            ]
            if judgment_rows:
                conn.execute(sa.insert(judgments), judgment_rows)
            if also is not None:
                also(conn, now)
        if draws is not None:
            for _, verdict in pairs:
                severe = None if verdict.final_band is None else verdict.final_band is Band.SEVERE
                draws.stored(verdict.event_id, severe)
        return len(inserted)

    # ------------------------------------------------------------------ reads

    def existing(self, event_ids: Iterable[str], judge_config_hash: str) -> set[str]:
        """The subset of ``event_ids`` already judged under ``judge_config_hash``.

        An id the database refuses even to look up (PostgreSQL: a NUL character) cannot have
        been stored either: it is isolated and reported absent, so its turn is judged once and
        then dead-lettered by the store step, instead of stalling every look-up.
        """
        ids = sorted(set(event_ids))
        chunks = [ids[start : start + IN_CHUNK] for start in range(0, len(ids), IN_CHUNK)]
        found: set[str] = set()
        with self._translate("reading verdicts"):
            for chunk in chunks:
                hits, refused = write_isolating(
                    chunk, lambda part: self._existing(part, judge_config_hash)
                )
                for hit in hits:
                    found.update(hit)
                for bad in refused:
                    _log_unreadable(bad)
        return found

    def _existing(self, ids: Sequence[str], judge_config_hash: str) -> set[str]:
        query = sa.select(verdicts.c.event_id).where(
            verdicts.c.judge_config_hash == judge_config_hash, verdicts.c.event_id.in_(ids)
        )
        with self._tx(write=False) as conn:
            return set(conn.scalars(query))

    def ping(self) -> bool:
        """``SELECT 1``; never raises (the reason of a failure is kept in ``last_error``)."""
        try:
            with self._engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
        except Exception as exc:  # a readiness probe must answer, whatever broke
            self.last_error = first_line(exc)
            return False
        self.last_error = None
        return True

    def close(self) -> None:
        self._engine.dispose()


def _log_unreadable(bad: Refused[str]) -> None:
    _log.warning("event id refused by the database", event_id=bad.item, error=bad.message)
