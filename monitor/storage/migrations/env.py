"""Alembic environment for casewatch.

``Store.migrate()`` hands over an open connection in ``config.attributes["connection"]`` (it
already holds the migration lock). Run by hand
(``alembic -c monitor/storage/migrations/alembic.ini``) the URL comes from the caller:
``-x url=...``, else ``sqlalchemy.url``. The environment is never read here: the settings are
built once, at casewatch's entrypoint.
"""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from sqlalchemy import create_engine, pool
from sqlalchemy.engine import Connection

from monitor.storage.engine import normalize_url
from monitor.storage.tables import UTCDateTime, metadata

config = context.config


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    if not url:
        raise SystemExit("no database URL: pass -x url=... (or set sqlalchemy.url)")
    return normalize_url(url)


def _render_item(type_: str, obj: object, autogen_context: Any) -> str | Literal[False]:
    # Revisions must not import monitor.storage.tables (they stay frozen): write its types
    # out plainly.
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        # SQLite cannot ALTER most things; batch mode recreates the table instead.
        render_as_batch=True,
        compare_type=True,
        render_item=_render_item,
    )


def run_offline() -> None:
    """Emit SQL for a DBA to apply (``alembic upgrade head --sql``)."""
    context.configure(
        url=_url(),
        target_metadata=metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    given = config.attributes.get("connection")
    if isinstance(given, Connection):
        _configure(given)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(_url(), poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            _configure(connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
