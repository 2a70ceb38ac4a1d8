"""Options and checks shared by the commands that read the verdict store (``inspect``,
``labels``, ``estimate``; ``--db`` also for ``run``, ``db``, ``detect``, ``drift``): which
database, times given as ISO or "2h ago", and what to say when the database is empty or was
never migrated.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import click

from monitor.commands.usage import fail
from monitor.config.settings import Settings, load_settings
from monitor.errors import CasewatchError
from monitor.runtime.program import casewatch_program
from monitor.storage.engine import redact_url
from monitor.storage.location import missing_database_message
from monitor.storage.store import Store
from monitor.storage.turn_queries import assistants, count_verdicts

F = TypeVar("F", bound=Callable[..., Any])

_AGO = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


_DB_HELP = "Database URL or SQLite file (default: storage.url of --config / the environment)."


def db_options(fn: F) -> F:
    fn = db_option(fn)
    fn = click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="YAML settings file (storage.url).",
    )(fn)
    return fn


def parse_time(option: str, value: str | None, now: datetime | None = None) -> datetime | None:
    """ISO 8601 (naive = UTC) or a duration ago: 30m, 2h, 1d."""
    if value is None:
        return None
    ago = _AGO.match(value.strip())
    if ago:
        delta = timedelta(**{_UNIT[ago.group(2)]: float(ago.group(1))})
        return (now or datetime.now(UTC)) - delta
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        fail(f"{option} {value!r} is neither an ISO 8601 time (2026-03-10T12:00:00Z) nor a "
             "duration ago (30m, 2h, 1d)")  # fmt: skip
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def db_url(db: str) -> str:
    """``--db`` as a database URL: a URL as given, anything else a SQLite file path."""
    return db if "://" in db else f"sqlite:///{Path(db).resolve()}"


def with_db(settings: Settings, db: str | None) -> Settings:
    """``settings`` with ``--db`` (when given) in place of storage.url."""
    if db is None:
        return settings
    storage = settings.storage.model_copy(update={"url": db_url(db)})
    return settings.model_copy(update={"storage": storage})


def store_args(db: str | None, config_file: Path | None) -> str:
    """The ``--db`` / ``--config`` a command was given, as arguments of a command it prints,
    so that one reaches the same store (without them it would open the default database)."""
    args = [*(["--db", db] if db is not None else []),
            *(["--config", str(config_file)] if config_file is not None else [])]  # fmt: skip
    return "".join(f" {shlex.quote(a)}" for a in args)


def db_option(fn: F) -> F:
    """``--db`` alone, for commands that take ``--config`` for more than storage.url."""
    return click.option("--db", "db", default=None, help=_DB_HELP)(fn)


def _url(db: str | None, config_file: Path | None) -> str:
    if db is not None:
        return db_url(db)
    return load_settings(config_file).storage.url


@contextmanager
def open_store(db: str | None, config_file: Path | None, *, need_turns: bool) -> Iterator[Store]:
    """The store of ``--db`` (else of the settings), checked to be migrated (and, with
    ``need_turns``, to hold a verdict)."""
    try:
        url = _url(db, config_file)
    except CasewatchError as exc:
        fail(str(exc))
    point = "pass --db FILE or URL (the demo prints its path), or set storage.url"
    args = store_args(db, config_file)
    with stored(url, need_turns=need_turns, point=point, args=args) as store:
        yield store


@contextmanager
def stored(
    url: str,
    *,
    create: bool = False,
    need_schema: bool = True,
    need_turns: bool = False,
    point: str | None = None,
    args: str = "",
) -> Iterator[Store]:
    """The one way a command opens the store. Unless ``create``, a SQLite file that does not
    exist is refused (opening it would create an empty one); ``need_schema``: migrated;
    ``need_turns``: holding a verdict. Any problem, then or while the command uses it, ends the
    command with one line on stderr and exit 2; the store is closed either way. ``args``: the
    ``--db``/``--config`` the command was given, for the commands the message suggests."""
    try:
        missing = None if create else missing_database_message(url, *([point] if point else []))
        if missing is not None:
            fail(missing)
        store = Store(url)
    except CasewatchError as exc:
        fail(str(exc))
    try:
        program = casewatch_program()
        if need_schema and store.revision() is None:
            fail(f"{redact_url(store.url)} has no casewatch schema: run `{program} db upgrade"
                 f"{args}` (then the daemon, `{program} run{args}`)")  # fmt: skip
        if need_turns and count_verdicts(store) == 0:
            fail(f"{redact_url(store.url)} holds no judged turn yet: run the daemon "
                 f"(`{program} run{args}`) or `{program} demo` first")  # fmt: skip
        yield store
    except CasewatchError as exc:
        fail(str(exc))
    finally:
        store.close()


def check_assistant(store: Store, assistant: str | None) -> None:
    if assistant is None:
        return
    known = assistants(store)
    if assistant not in known:
        fail(f"unknown assistant {assistant!r}; the store has: {', '.join(known) or 'none'}")
