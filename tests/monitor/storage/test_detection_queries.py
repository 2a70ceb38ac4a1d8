"""The detectors' marks on the verdicts: the upgrade to them keeps the old cursor's word, and a
save refuses to count what another run counted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from monitor.errors import LeaseLost
from monitor.storage import detection_queries as q
from monitor.storage.store import Store
from monitor.storage.tables import turn_row, turns, verdict_row, verdicts
from tests.fixtures.databases import make_turn
from tests.fixtures.detection import verdict

JSONB_OR_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
P = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # the old cursor's position


def _store_verdict(conn: sa.Connection, event_id: str, stored_at: datetime) -> int:
    turn = make_turn(event_id)
    conn.execute(sa.insert(turns), [turn_row(turn, stored_at)])
    row = verdict_row(verdict(turn, False), stored_at)
    return int(conn.execute(sa.insert(verdicts).values(row).returning(verdicts.c.id)).scalar_one())


def _unobserved(store: Store) -> set[str]:
    with store.transaction(write=False) as conn:
        query = sa.select(verdicts.c.event_id).where(verdicts.c.observed_at.is_(None))
        return set(conn.scalars(query))


def test_the_upgrade_marks_what_the_old_cursor_had_passed(db_url: str) -> None:
    store = Store(db_url)
    try:
        store.migrate("0009")
        with store.transaction(write=True) as conn:
            ids = {
                "long-passed": _store_verdict(conn, "long-passed", P - timedelta(minutes=5)),
                "seen": _store_verdict(conn, "seen", P - timedelta(seconds=60)),
                "late-commit": _store_verdict(conn, "late-commit", P - timedelta(seconds=30)),
                "after": _store_verdict(conn, "after", P + timedelta(seconds=5)),
            }
            seen = {str(ids["seen"]): (P - timedelta(seconds=60)).timestamp()}
            cursor = sa.table(
                "detector_cursor",
                sa.column("name"),
                sa.column("position", sa.DateTime(timezone=True)),
                sa.column("seen", JSONB_OR_JSON),
                sa.column("updated_at", sa.DateTime(timezone=True)),
            )
            at = P if store.dialect == "postgresql" else P.replace(tzinfo=None)
            conn.execute(
                sa.insert(cursor).values(name="verdicts", position=at, seen=seen, updated_at=at)
            )
        store.migrate()
        # Read past the old window, or among its seen ids: observed. Committed after the old
        # cursor read its window, or stored after it: the next run's.
        assert _unobserved(store) == {"late-commit", "after"}
        assert q.read_cursor(store) == q.Cursor(P, 0)
        assert [o.id for o in q.read_new(store, [])] == [ids["late-commit"], ids["after"]]
    finally:
        store.close()


def test_the_upgrade_without_a_cursor_marks_nothing(db_url: str) -> None:
    store = Store(db_url)
    try:
        store.migrate("0009")
        with store.transaction(write=True) as conn:
            _store_verdict(conn, "before-any-run", P)
        store.migrate()
        assert _unobserved(store) == {"before-any-run"}  # the first run takes it as history
        assert q.read_cursor(store) == q.Cursor()
    finally:
        store.close()


def test_a_save_from_a_stale_cursor_writes_nothing(store: Store) -> None:
    with store.transaction(write=True) as conn:
        first = _store_verdict(conn, "one", P)
    start = q.save(store, [], q.Cursor(), [first], P)
    assert start == q.Cursor(P, 1) and q.read_cursor(store) == start
    with store.transaction(write=True) as conn:
        second = _store_verdict(conn, "two", P)
    with pytest.raises(LeaseLost, match="saved by another run"):
        q.save(store, [], q.Cursor(), [second], P + timedelta(seconds=1))  # a second first run
    with pytest.raises(LeaseLost, match="1 of the verdicts this run read were observed"):
        q.save(store, [], start, [first, second], P + timedelta(seconds=1))
    assert q.read_cursor(store) == start and _unobserved(store) == {"two"}
    later = q.save(store, [], start, [second], P + timedelta(seconds=2))
    assert later == q.Cursor(P + timedelta(seconds=2), 2) and _unobserved(store) == set()
