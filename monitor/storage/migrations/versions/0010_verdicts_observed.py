"""The detectors mark each verdict they observe; their cursor holds a generation, not a seen set.

``verdicts.observed_at`` is NULL until the detection job has fed the verdict to the detectors,
and set in the transaction that saves their state (a partial index finds the NULL ones). The
cursor's ``seen`` ids (of a re-read window on ``stored_at``, which a commit later than the window
escaped) give way to ``generation``, bumped by every save so two runs cannot both save from
one state.

Verdicts already stored: those the old cursor had passed are marked observed (stored before its
position less 120 s, the default overlap, or among its seen ids); the rest, committed after the
last run read them, are left for the next run. Without a cursor (detection never ran) nothing
is marked: the first run takes what is stored as history, as before.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types in monitor/storage/tables.py as of this revision.
JSONDoc = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
Timestamp = sa.DateTime(timezone=True)
UNOBSERVED = sa.text("observed_at IS NULL")


# What the old cursor had passed, in SQL (so ``alembic upgrade --sql`` prints it too): stored
# before its position less the overlap, or among the ids it had seen. No cursor: nothing.
MARK_PASSED = {
    "postgresql": """
UPDATE verdicts SET observed_at = c.position FROM detector_cursor c
WHERE c.name = 'verdicts'
  AND (verdicts.stored_at < c.position - INTERVAL '120 seconds'
       OR c.seen ? CAST(verdicts.id AS TEXT))
""",
    "sqlite": """
UPDATE verdicts SET observed_at = (SELECT position FROM detector_cursor WHERE name = 'verdicts')
WHERE EXISTS (
  SELECT 1 FROM detector_cursor c
  WHERE c.name = 'verdicts'
    AND (verdicts.stored_at < datetime(c.position, '-120 seconds')
         OR EXISTS (SELECT 1 FROM json_each(c.seen) j WHERE j.key = CAST(verdicts.id AS TEXT)))
)
""",
}


def upgrade() -> None:
    op.add_column("verdicts", sa.Column("observed_at", Timestamp, nullable=True))
    op.create_index(
        "ix_verdicts_unobserved",
        "verdicts",
        ["id"],
        sqlite_where=UNOBSERVED,
        postgresql_where=UNOBSERVED,
    )
    op.execute(sa.text(MARK_PASSED[op.get_context().dialect.name]))
    with op.batch_alter_table("detector_cursor") as batch:
        batch.drop_column("seen")
        batch.add_column(
            sa.Column("generation", sa.BigInteger(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    # The old cursor re-reads from its position: an empty seen set at least skips nothing.
    with op.batch_alter_table("detector_cursor") as batch:
        batch.drop_column("generation")
        batch.add_column(sa.Column("seen", JSONDoc, nullable=False, server_default="{}"))
    op.drop_index("ix_verdicts_unobserved", table_name="verdicts")
    op.drop_column("verdicts", "observed_at")
