"""Rubric gradings of live answers (Pencils Down): grades and extracted answers per turn and entry.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types in monitor/storage/tables.py as of this revision.
JSONDoc = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "rubric_gradings",
        sa.Column("id", BigId, nullable=False),
        sa.Column("event_id", sa.String(256), nullable=False),
        sa.Column("entry_id", sa.String(128), nullable=False),
        sa.Column("grader", sa.String(512), nullable=False),
        sa.Column("assistant_name", sa.String(256), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("reviewed", sa.Boolean(), nullable=False),
        sa.Column("coverage", sa.Float(), nullable=True),
        sa.Column("covered_grade", sa.Integer(), nullable=False),
        sa.Column("grades", JSONDoc, nullable=True),
        sa.Column("path_counts", JSONDoc, nullable=False),
        sa.Column("passages", sa.Integer(), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("graded_at", Timestamp, nullable=False),
        sa.CheckConstraint(
            "status IN ('ok', 'failed')", name=op.f("ck_rubric_gradings_status")
        ),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["turns.event_id"],
            name=op.f("fk_rubric_gradings_event_id_turns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rubric_gradings")),
        sa.UniqueConstraint(
            "event_id",
            "entry_id",
            "grader",
            name=op.f("uq_rubric_gradings_event_id_entry_id_grader"),
        ),
    )
    op.create_index(op.f("ix_rubric_gradings_graded_at"), "rubric_gradings", ["graded_at"])


def downgrade() -> None:
    op.drop_table("rubric_gradings")
