"""Which outcome events the outcome detectors (negative feedback, hand-off and reopen rates per
assistant) have observed.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types in monitor/storage/tables.py as of this revision.
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "outcome_observations",
        sa.Column("outcome_id", sa.String(256), nullable=False),
        sa.Column("observed_at", Timestamp, nullable=False),
        sa.ForeignKeyConstraint(
            ["outcome_id"],
            ["outcome_events.outcome_id"],
            name=op.f("fk_outcome_observations_outcome_id_outcome_events"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("outcome_id", name=op.f("pk_outcome_observations")),
    )


def downgrade() -> None:
    op.drop_table("outcome_observations")
