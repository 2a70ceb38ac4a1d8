"""The schema's migrations (Alembic), run in code: no alembic.ini is needed on disk.

Replicas starting together on PostgreSQL take turns (a transaction-scoped advisory lock), so
one upgrades and the others find the schema current.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext


class Store(Protocol):
    """What migrating needs of ``monitor.storage.store.Store`` (which imports this module)."""

    @property
    def dialect(self) -> str: ...

    def transaction(
        self, *, write: bool, action: str = ...
    ) -> AbstractContextManager[sa.Connection]: ...


MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# pg_advisory_xact_lock key held while migrating, so replicas starting together take turns.
_MIGRATION_LOCK_KEY = 0x6361_7365_7761_7463  # "casewatc"


def alembic_config(url: str | None = None) -> Config:
    """An Alembic configuration built in code: no alembic.ini is needed on disk."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("path_separator", "os")
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def migrate(store: Store, revision: str = "head") -> None:
    """``alembic upgrade`` on ``store``'s database, serialised between replicas on PG."""
    with store.transaction(write=True, action="migrating the schema") as conn:
        if store.dialect == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def downgrade(store: Store, revision: str = "base") -> None:
    """``alembic downgrade``; ``base`` drops every casewatch table."""
    with store.transaction(write=True, action="downgrading the schema") as conn:
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def current_revision(store: Store) -> str | None:
    """The schema revision the database is at (None before the first migration)."""
    with store.transaction(write=False, action="reading the schema revision") as conn:
        return MigrationContext.configure(conn).get_current_revision()


__all__ = ["MIGRATIONS_DIR", "alembic_config", "current_revision", "downgrade", "migrate"]
