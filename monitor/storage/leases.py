"""Job leases in SQL: which replica runs a scheduled job (one at a time, taken over on expiry).

A lease is a row per job. Taking it is one upsert that only overwrites a row that expired or is
already ours, so two replicas racing for it cannot both win: the database serialises the upsert
(a row lock on PostgreSQL, the write lock on SQLite) and each then reads who owns the row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from monitor.errors import LeaseLost
from monitor.storage.store import Store
from monitor.storage.tables import job_leases


@dataclass(frozen=True)
class Fence:
    """Save only if ``owner`` holds ``job``'s lease at ``at`` (``require_lease``)."""

    job: str
    owner: str
    at: datetime


def require_lease(conn: sa.Connection, job: str, owner: str, now: datetime) -> None:
    """Inside a writing transaction: raise ``LeaseLost`` unless ``owner`` holds ``job``'s
    unexpired lease. On PostgreSQL the lease row is locked until the transaction ends, so the
    lease cannot move between this check and the commit (another replica's ``acquire`` waits);
    on SQLite the writer already holds the database's write lock."""
    query = sa.select(job_leases.c.owner, job_leases.c.expires_at).where(job_leases.c.job == job)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    row = conn.execute(query).first()
    if row is None or row.owner != owner or row.expires_at <= now:
        holder = "nobody" if row is None else row.owner
        raise LeaseLost(
            f"job {job!r}: this replica ({owner}) no longer holds its lease (held by {holder}); "
            "the run's results are not saved"
        )


class Leases:
    def __init__(self, store: Store) -> None:
        self._store = store

    def acquire(self, job: str, owner: str, now: datetime, ttl_seconds: float) -> bool:
        """Take or renew ``job``'s lease until ``now + ttl``; False if another owner holds it."""
        expires = now + timedelta(seconds=ttl_seconds)
        stmt = self._store.upsert(
            job_leases,
            ["job"],
            ["owner", "acquired_at", "expires_at"],
            where=sa.or_(job_leases.c.expires_at <= now, job_leases.c.owner == owner),
            values={"job": job, "owner": owner, "acquired_at": now, "expires_at": expires},
        )
        with self._store.transaction(write=True) as conn:
            conn.execute(stmt)
            holder = conn.execute(
                sa.select(job_leases.c.owner).where(job_leases.c.job == job)
            ).scalar_one()
        return bool(holder == owner)

    def release(self, job: str, owner: str) -> None:
        """Give the lease up (on shutdown) so another replica need not wait for it to expire."""
        with self._store.transaction(write=True) as conn:
            conn.execute(
                sa.delete(job_leases).where(job_leases.c.job == job, job_leases.c.owner == owner)
            )

    def holder(self, job: str, now: datetime) -> str | None:
        """The owner of an unexpired lease on ``job``, if any."""
        with self._store.transaction(write=False) as conn:
            row = conn.execute(
                sa.select(job_leases.c.owner).where(
                    job_leases.c.job == job, job_leases.c.expires_at > now
                )
            ).first()
        return None if row is None else str(row.owner)
