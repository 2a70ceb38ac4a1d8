"""Sequential detectors: their state per (assistant, signal) and their cursor.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types in monitor/storage/tables.py as of this revision.
JSONDoc = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "detector_states",
        sa.Column("assistant", sa.String(256), nullable=False),
        sa.Column("signal", sa.String(64), nullable=False),
        sa.Column("armed", sa.Boolean(), nullable=False),
        sa.Column("baseline_rate", sa.Float(), nullable=True),
        sa.Column("baseline_source", sa.String(16), nullable=False),
        sa.Column("reference_turns", sa.Integer(), nullable=False),
        sa.Column("turn_rate", sa.Float(), nullable=True),
        sa.Column("statistic", sa.Float(), nullable=False),
        sa.Column("alarm", sa.Boolean(), nullable=False),
        sa.Column("alarm_at", Timestamp, nullable=True),
        sa.Column("change_point", Timestamp, nullable=True),
        sa.Column("rate_since", sa.Float(), nullable=True),
        sa.Column("observations", sa.BigInteger(), nullable=False),
        sa.Column("calibrated_at", Timestamp, nullable=True),
        sa.Column("state", JSONDoc, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("assistant", "signal", name=op.f("pk_detector_states")),
    )
    op.create_table(
        "detector_cursor",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("position", Timestamp, nullable=False),
        sa.Column("seen", JSONDoc, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_detector_cursor")),
    )


def downgrade() -> None:
    op.drop_table("detector_cursor")
    op.drop_table("detector_states")
