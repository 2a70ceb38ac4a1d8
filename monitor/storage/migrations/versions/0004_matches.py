"""Pairwise matches against baseline tiers (DICE), with both orders' raw outputs.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types in monitor/storage/tables.py as of this revision.
JSONDoc = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "matches",
        sa.Column("id", BigId, nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("assistant", sa.String(256), nullable=False),
        sa.Column("opponent", sa.String(64), nullable=False),
        sa.Column("probe_id", sa.String(256), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("event_id", sa.String(256), nullable=True),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("judge", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("prompt_version", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("outcome", sa.String(8), nullable=True),
        sa.Column("disagreement", sa.Float(), nullable=True),
        sa.Column("forward", JSONDoc, nullable=False),
        sa.Column("swapped", JSONDoc, nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.CheckConstraint("status IN ('ok', 'judge_failed')", name=op.f("ck_matches_status")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_matches")),
    )
    op.create_index(op.f("ix_matches_run_id"), "matches", ["run_id"])
    op.create_index(
        op.f("ix_matches_assistant_created_at"), "matches", ["assistant", "created_at"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_matches_assistant_created_at"), table_name="matches")
    op.drop_index(op.f("ix_matches_run_id"), table_name="matches")
    op.drop_table("matches")
