"""``casewatch db``: schema migrations and retention for the verdict store."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from monitor.commands.store_access import db_option, stored, with_db
from monitor.commands.usage import settings_or_fail
from monitor.config.settings import Settings
from monitor.storage.engine import redact_url
from monitor.storage.retention import purge_older_than
from monitor.storage.store import Store

_config_option = click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="YAML settings file (storage.url, storage.retention_days).",
)


@contextmanager
def _store(config_file: Path | None, db: str | None) -> Iterator[tuple[Settings, Store]]:
    # Operator-facing errors (bad config, unreachable database) end as one clear line, exit 2.
    settings = with_db(settings_or_fail(config_file), db)
    with stored(settings.storage.url, create=True, need_schema=False) as store:
        yield settings, store


@click.group()
def db() -> None:
    """Manage the verdict database (storage.url)."""


@db.command()
@_config_option
@db_option
def upgrade(config_file: Path | None, db: str | None) -> None:
    """Create or migrate the schema to the latest revision (safe to run repeatedly)."""
    with _store(config_file, db) as (_settings, store):
        store.migrate()
        click.echo(f"{redact_url(store.url)}: schema at revision {store.revision()}")


@db.command()
@_config_option
@db_option
@click.option(
    "--older-than-days",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Delete verdicts stored more than N days ago. Default: storage.retention_days.",
)
def purge(config_file: Path | None, db: str | None, older_than_days: float | None) -> None:
    """Delete old verdicts, their judgments and the turns nothing refers to any more."""
    with _store(config_file, db) as (settings, store):
        days = older_than_days if older_than_days is not None else settings.storage.retention_days
        if days is None:
            raise click.UsageError(
                "retention is disabled (storage.retention_days is null): pass --older-than-days N"
            )
        cutoff = datetime.now(UTC) - timedelta(days=days)
        deleted = purge_older_than(store, cutoff)
        click.echo(
            f"deleted {deleted} verdict(s) stored before {cutoff.isoformat(timespec='seconds')}"
        )


COMMANDS: list[click.Command] = [db]
