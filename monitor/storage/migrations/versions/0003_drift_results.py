"""Drift results: one row per (drift run, assistant, signal).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types in monitor/storage/tables.py as of this revision.
JSONDoc = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite autoincrements INTEGER only
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "drift_results",
        sa.Column("id", BigId, nullable=False),
        sa.Column("run_at", Timestamp, nullable=False),
        sa.Column("assistant", sa.String(256), nullable=False),
        sa.Column("signal", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("test", sa.String(32), nullable=False),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("statistic", sa.Float(), nullable=True),
        sa.Column("p_value", sa.Float(), nullable=True),
        sa.Column("q_value", sa.Float(), nullable=True),
        sa.Column("effect", sa.Float(), nullable=True),
        sa.Column("effect_name", sa.String(32), nullable=False),
        sa.Column("min_effect", sa.Float(), nullable=False),
        sa.Column("shift", sa.Float(), nullable=True),
        sa.Column("detected", sa.Boolean(), nullable=False),
        sa.Column("recent_n", sa.Integer(), nullable=False),
        sa.Column("reference_n", sa.Integer(), nullable=False),
        sa.Column("recent_start", Timestamp, nullable=False),
        sa.Column("recent_end", Timestamp, nullable=False),
        sa.Column("reference_start", Timestamp, nullable=False),
        sa.Column("reference_end", Timestamp, nullable=False),
        sa.Column("details", JSONDoc, nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.CheckConstraint(
            "status IN ('ok', 'insufficient_data')", name=op.f("ck_drift_results_status")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_drift_results")),
    )
    op.create_index(op.f("ix_drift_results_run_at"), "drift_results", ["run_at"])
    op.create_index(
        op.f("ix_drift_results_assistant_signal_run_at"),
        "drift_results",
        ["assistant", "signal", "run_at"],
    )


def downgrade() -> None:
    op.drop_table("drift_results")
