"""Alembic migrations on SQLite and PostgreSQL: upgrade, downgrade, and no drift from tables.py."""

from __future__ import annotations

import fnmatch
import threading
import tomllib

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.script import ScriptDirectory

from monitor.errors import StorageError
from monitor.storage.engine import normalize_url
from monitor.storage.schema import MIGRATIONS_DIR, alembic_config
from monitor.storage.store import Store
from monitor.storage.tables import TABLES

CASEWATCH_TABLES = {t.name for t in TABLES}


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(normalize_url(url))
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_migrate_from_empty_creates_the_tables_and_downgrade_removes_them(db_url: str) -> None:
    store = Store(db_url)
    assert store.revision() is None
    assert _tables(db_url) == set()

    store.migrate()
    assert _tables(db_url) == CASEWATCH_TABLES | {"alembic_version"}
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert store.revision() == head

    store.migrate()  # running it again is a no-op
    assert store.revision() == head

    store.downgrade("base")
    assert _tables(db_url) & CASEWATCH_TABLES == set()
    assert store.revision() is None
    store.close()


def test_tables_py_and_the_migrations_describe_the_same_schema(db_url: str) -> None:
    store = Store(db_url)
    store.migrate()
    store.close()
    engine = sa.create_engine(normalize_url(db_url))
    try:
        with engine.connect() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.check(cfg)  # raises if autogenerate would emit any operation
    finally:
        engine.dispose()


def test_replicas_migrating_at_the_same_time_both_succeed(db_url: str) -> None:
    stores = [Store(db_url) for _ in range(3)]
    barrier = threading.Barrier(len(stores))
    errors: list[BaseException] = []

    def worker(s: Store) -> None:
        barrier.wait()
        try:
            s.migrate()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert all(s.revision() == head for s in stores)
    for s in stores:
        s.close()


def test_migrate_on_an_unreachable_database_raises_storage_error() -> None:
    store = Store("postgresql+psycopg://postgres@127.0.0.1:1/x")
    with pytest.raises(StorageError, match="migrating the schema failed"):
        store.migrate()
    store.close()


def test_offline_mode_prints_the_sql_for_a_dba(capsys: pytest.CaptureFixture[str]) -> None:
    # No connection is made: the DDL is rendered for PostgreSQL from the URL alone.
    command.upgrade(alembic_config("postgresql+psycopg://nobody@db.invalid/x"), "head", sql=True)
    out = capsys.readouterr().out
    assert "CREATE TABLE turns" in out
    assert "JSONB" in out
    assert "CONSTRAINT uq_verdicts_event_id_judge_config_hash UNIQUE" in out
    assert "ON DELETE CASCADE" in out


def test_every_migration_file_is_shipped_as_package_data() -> None:
    # Store.migrate() runs from the installed package: a file missing from package-data would
    # only show up as a broken `casewatch db upgrade` after `pip install`.
    pyproject = tomllib.loads((MIGRATIONS_DIR.parents[2] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["monitor"]
    package_root = MIGRATIONS_DIR.parents[1]
    files = [
        p.relative_to(package_root).as_posix()
        for p in MIGRATIONS_DIR.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    assert "storage/migrations/env.py" in files
    assert "storage/migrations/script.py.mako" in files
    assert "storage/migrations/versions/0001_initial.py" in files
    unshipped = [f for f in files if not any(fnmatch.fnmatch(f, pat) for pat in patterns)]
    assert unshipped == []
