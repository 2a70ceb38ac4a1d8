"""SQL storage of turns, verdicts and judgments (SQLAlchemy 2 Core on SQLite or PostgreSQL).

Writes are idempotent on ``(event_id, judge_config_hash)``: turns and verdicts go in with
``INSERT ... ON CONFLICT DO NOTHING`` and judgments only for the verdicts this transaction
actually created, so Kafka replays and concurrent replicas never store a verdict twice.
Every SQLAlchemy, DBAPI or Alembic error leaves this module as ``StorageError``; one about the
data of a row (``monitor.storage.refusals``) as ``UnstorableRow``, which is never worth a retry.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import sqlalchemy as sa
import structlog
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.util.exc import CommandError
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from monitor.clock import Clock, SystemClock
from monitor.errors import StorageError, UnstorableRow
from monitor.models import TurnEvent, Verdict
from monitor.settings import StorageConfig
from monitor.storage.refusals import Refused, is_refusal, refusal_message, write_isolating
from monitor.storage.tables import (
    AUDIT_TABLES,
    judgment_row,
    judgments,
    turn_row,
    turns,
    verdict_row,
    verdicts,
)

_log = structlog.get_logger(__name__)
MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# pg_advisory_xact_lock key held while migrating, so replicas starting together take turns.
_MIGRATION_LOCK_KEY = 0x6361_7365_7761_7463  # "casewatc"
_PURGE_BATCH = 5_000
_IN_CHUNK = 500  # keeps IN (...) lists far below SQLite's bound-parameter limit
_SQLITE_BUSY_MS = 30_000
_PG_CONNECT_TIMEOUT_S = 5


def normalize_url(url: str) -> str:
    """Point bare ``postgres://`` / ``postgresql://`` URLs at psycopg 3, the driver we ship."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def redact_url(url: str) -> str:
    """The URL with its password masked, for messages and logs."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except SQLAlchemyError:
        return "<unparseable database URL>"


def alembic_config(url: str | None = None) -> Config:
    """An Alembic configuration built in code: no alembic.ini is needed on disk."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("path_separator", "os")
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def _hint(exc: BaseException) -> str:
    text = str(exc).lower()
    if "no such table" in text or "does not exist" in text or "undefined" in text:
        return "the schema looks missing: run `casewatch db upgrade`"
    if "database is locked" in text:
        return "another process kept the SQLite write lock; run several replicas on PostgreSQL"
    if isinstance(exc, sa.exc.ArgumentError | sa.exc.NoSuchModuleError):
        return "check storage.url (e.g. sqlite:///casewatch.db or postgresql://user@host/db)"
    if isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError):
        return "check storage.url and that the database server is reachable and accepting logins"
    return "check storage.url, that the database is reachable and that `casewatch db upgrade` ran"


def _first_line(exc: BaseException) -> str:
    source = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    lines = str(source).strip().splitlines()
    return lines[0] if lines else type(source).__name__


Item = tuple[TurnEvent, Verdict]


class SaveResult(NamedTuple):
    """What ``save_batch`` did: verdicts new to the store, and the pairs the database refused
    on their own (every other pair of the batch is stored)."""

    inserted: int
    refused: list[Refused[Item]]


class Store:
    """Persists verdicts for audit and idempotency. Safe to share between threads."""

    def __init__(
        self,
        url: str,
        *,
        echo: bool = False,
        clock: Clock | None = None,
    ) -> None:
        self.url = normalize_url(url)
        self._clock = clock or SystemClock()
        self.last_error: str | None = None  # why the last ping failed, for /readyz
        with self._translate("opening the database"):
            self._dialect = sa.make_url(self.url).get_backend_name()
            if self._dialect not in ("sqlite", "postgresql"):
                raise StorageError(
                    f"unsupported database {self._dialect!r} in storage.url "
                    f"{redact_url(self.url)}: use sqlite:///FILE or postgresql://USER@HOST/DB"
                )
            if self._dialect == "sqlite" and _in_memory(self.url):
                # Each pooled connection would get its own private, empty database.
                raise StorageError(
                    "an in-memory SQLite database cannot be shared between connections: "
                    "set storage.url to a file, e.g. sqlite:///casewatch.db"
                )
            self._engine = _create_engine(self.url, echo=echo)

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
                f"{action} failed on {redact_url(self.url)}: {_first_line(exc)} ({_hint(exc)})"
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
    def transaction(self, *, write: bool) -> Iterator[Connection]:
        """One transaction for the SQL modules of other features (leases, drift, matches...).

        Writers take SQLite's write lock up front, like the store's own writes; database errors
        come out as ``StorageError``.
        """
        with self._translate("a database transaction"), self._tx(write=write) as conn:
            yield conn

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock.time(), tz=UTC)

    def _insert(self, table: sa.Table) -> Any:
        if self._dialect == "postgresql":
            return postgresql.insert(table)
        return sqlite.insert(table)

    # ------------------------------------------------------------------ schema

    def migrate(self, revision: str = "head") -> None:
        """``alembic upgrade head`` on this database, serialised between replicas on PG."""
        with self._translate("migrating the schema"), self._tx(write=True) as conn:
            if self._dialect == "postgresql":
                conn.execute(
                    sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY}
                )
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)

    def downgrade(self, revision: str = "base") -> None:
        """``alembic downgrade``; ``base`` drops every casewatch table."""
        with self._translate("downgrading the schema"), self._tx(write=True) as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, revision)

    def revision(self) -> str | None:
        """The schema revision the database is at (None before the first migration)."""
        with self._translate("reading the schema revision"), self._tx(write=False) as conn:
            return MigrationContext.configure(conn).get_current_revision()

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

    def _write_batch(self, pairs: Sequence[Item]) -> int:
        now = self._now()
        # A replayed event keeps its first stored copy (ON CONFLICT DO NOTHING on turns too).
        turn_rows = {turn.event_id: turn_row(turn, now) for turn, _ in pairs}
        by_key = {(v.event_id, v.judge_config_hash): v for _, v in pairs}
        verdict_rows = [verdict_row(v, now) for _, v in pairs]
        with self._tx(write=True) as conn:
            conn.execute(
                self._insert(turns).on_conflict_do_nothing(index_elements=["event_id"]),
                list(turn_rows.values()),
            )
            inserted = conn.execute(
                self._insert(verdicts)
                .on_conflict_do_nothing(index_elements=["event_id", "judge_config_hash"])
                .returning(verdicts.c.id, verdicts.c.event_id, verdicts.c.judge_config_hash),
                verdict_rows,
            ).all()
            judgment_rows = [
                judgment_row(j, row.id)
                for row in inserted
                for j in by_key[(row.event_id, row.judge_config_hash)].judgments
            ]
            if judgment_rows:
                conn.execute(sa.insert(judgments), judgment_rows)
        return len(inserted)

    def purge_older_than(self, cutoff: datetime) -> int:
        """Retention: delete verdicts (and their judgments) stored before ``cutoff``, then
        turns stored before it that no verdict refers to. Returns the verdicts deleted.

        Deletes in batches, each its own transaction, so a large purge never holds the write
        lock (SQLite) or a huge snapshot (PostgreSQL) for long.
        """
        deleted = 0
        old_verdicts = (
            sa.select(verdicts.c.id).where(verdicts.c.stored_at < cutoff).limit(_PURGE_BATCH)
        )
        orphan_turns = (
            sa.select(turns.c.event_id)
            .where(turns.c.stored_at < cutoff)
            .where(~sa.exists().where(verdicts.c.event_id == turns.c.event_id))
            .limit(_PURGE_BATCH)
        )
        with self._translate("purging old rows"):
            while True:
                with self._tx(write=True) as conn:
                    # ON DELETE CASCADE removes the judgments (SQLite: foreign_keys=ON).
                    n = conn.execute(
                        sa.delete(verdicts).where(verdicts.c.id.in_(old_verdicts.scalar_subquery()))
                    ).rowcount
                deleted += n
                if n < _PURGE_BATCH:
                    break
            while True:
                with self._tx(write=True) as conn:
                    n = conn.execute(
                        sa.delete(turns).where(turns.c.event_id.in_(orphan_turns.scalar_subquery()))
                    ).rowcount
                if n < _PURGE_BATCH:
                    break
        return deleted

    # ------------------------------------------------------------------ reads

    def has_verdict(self, event_id: str, judge_config_hash: str) -> bool:
        return bool(self.existing([event_id], judge_config_hash))

    def existing(self, event_ids: Iterable[str], judge_config_hash: str) -> set[str]:
        """The subset of ``event_ids`` already judged under ``judge_config_hash``.

        An id the database refuses even to look up (PostgreSQL: a NUL character) cannot have
        been stored either: it is isolated and reported absent, so its turn is judged once and
        then dead-lettered by the store step, instead of stalling every look-up.
        """
        ids = sorted(set(event_ids))
        chunks = [ids[start : start + _IN_CHUNK] for start in range(0, len(ids), _IN_CHUNK)]
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

    def event(self, event_id: str) -> dict[str, Any] | None:
        """The turn event exactly as stored for audit (unknown producer fields included)."""
        query = sa.select(turns.c.event).where(turns.c.event_id == event_id)
        with self._translate("reading a turn"), self._tx(write=False) as conn:
            doc: dict[str, Any] | None = conn.scalar(query)
        return doc

    def ping(self) -> bool:
        """``SELECT 1``; never raises (the reason of a failure is kept in ``last_error``)."""
        try:
            with self._engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
        except Exception as exc:  # a readiness probe must answer, whatever broke
            self.last_error = _first_line(exc)
            return False
        self.last_error = None
        return True

    def counts(self) -> dict[str, int]:
        with self._translate("counting rows"), self._tx(write=False) as conn:
            return {
                t.name: int(conn.scalar(sa.select(sa.func.count()).select_from(t)) or 0)
                for t in AUDIT_TABLES
            }

    def verdicts(self, *, assistant: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        """Newest verdicts first, each with its turn's identity and its ``judgments`` list."""
        query = (
            sa.select(
                verdicts,
                turns.c.conversation_id,
                turns.c.turn_index,
                turns.c.assistant_name,
                turns.c.assistant_version,
                turns.c.assistant_model,
                turns.c.event_timestamp,
            )
            .join(turns, turns.c.event_id == verdicts.c.event_id)
            .order_by(verdicts.c.id.desc())
            .limit(limit)
        )
        if assistant is not None:
            query = query.where(turns.c.assistant_name == assistant)
        with self._translate("reading verdicts"), self._tx(write=False) as conn:
            rows = [dict(r._mapping) for r in conn.execute(query)]
            by_id: dict[int, list[dict[str, Any]]] = {r["id"]: [] for r in rows}
            ids = list(by_id)
            for start in range(0, len(ids), _IN_CHUNK):
                chunk = ids[start : start + _IN_CHUNK]
                query_j = (
                    sa.select(judgments)
                    .where(judgments.c.verdict_id.in_(chunk))
                    .order_by(judgments.c.id)
                )
                for j in conn.execute(query_j):
                    by_id[j.verdict_id].append(dict(j._mapping))
        for row in rows:
            row["judgments"] = by_id[row["id"]]
        return rows

    def close(self) -> None:
        self._engine.dispose()


def _log_unreadable(bad: Refused[str]) -> None:
    _log.warning("event id refused by the database", event_id=bad.item, error=bad.message)


# ---------------------------------------------------------------------- engine


def _create_engine(url: str, *, echo: bool) -> Engine:
    parsed = sa.make_url(url)
    if parsed.get_backend_name() == "postgresql":
        connect_args: dict[str, Any] = {"application_name": "casewatch"}
        if "connect_timeout" not in parsed.query:
            # Fail fast when the server is down: /readyz and startup must not hang.
            connect_args["connect_timeout"] = _PG_CONNECT_TIMEOUT_S
        return sa.create_engine(url, echo=echo, pool_pre_ping=True, connect_args=connect_args)
    # A SQLite file connection cannot go stale: no liveness query before every checkout
    # (it was ~9 % of the daemon loop's samples in bench/judging.py).
    sqlite = parsed.get_backend_name() == "sqlite"
    engine = sa.create_engine(url, echo=echo, pool_pre_ping=not sqlite)
    if sqlite:
        sa.event.listen(engine, "connect", _sqlite_on_connect)
        sa.event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def _in_memory(url: str) -> bool:
    parsed = sa.make_url(url)
    return parsed.database in (None, "", ":memory:") or "mode=memory" in str(parsed)


def _sqlite_on_connect(dbapi_conn: Any, _record: Any) -> None:
    # SQLAlchemy, not the sqlite3 module, decides when transactions begin (see _sqlite_on_begin).
    dbapi_conn.isolation_level = None
    cursor = dbapi_conn.cursor()
    try:
        # busy_timeout first: writers (and the WAL switch below) wait instead of failing.
        cursor.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_MS}")
        # WAL: readers never block the writer.
        _switch_to_wal(cursor)
        cursor.execute("PRAGMA foreign_keys=ON")  # needed for ON DELETE CASCADE
        cursor.execute("PRAGMA synchronous=NORMAL")  # durable enough with WAL, much faster
    finally:
        cursor.close()


def _switch_to_wal(cursor: Any) -> None:
    # WAL is a property of the file: once one connection switched it, the others read "wal" and
    # skip the switch. The switch needs an exclusive lock and SQLite does not always call the busy
    # handler for it (replicas opening a new file together got "database is locked" at once),
    # so it is retried here within the same busy budget.
    deadline = time.monotonic() + _SQLITE_BUSY_MS / 1000
    delay = 0.005
    while True:
        mode = cursor.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() == "wal":
            return
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def _sqlite_on_begin(conn: Connection) -> None:
    immediate = conn.get_execution_options().get("casewatch_write", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
