"""Failure modes: recurring causes found among the failed turns of each assistant.

``failure_modes`` holds one row per (assistant, mode) with its signature, label and the figures
of the newest run that found it; ``failure_mode_members`` which turn the newest run put in which
mode (replaced whole per assistant each run); ``failure_mode_runs`` one row per run and
assistant, including the runs that had too few failed turns to group.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types in monitor/storage/tables.py as of this revision.
JSONDoc = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "failure_modes",
        sa.Column("assistant", sa.String(256), nullable=False),
        sa.Column("mode_id", sa.String(32), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("terms", JSONDoc, nullable=False),
        sa.Column("metrics", JSONDoc, nullable=False),
        sa.Column("first_seen", Timestamp, nullable=False),
        sa.Column("last_seen", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.Column("present", sa.Boolean(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("share", sa.Float(), nullable=False),
        sa.Column("recent", sa.Integer(), nullable=False),
        sa.Column("earlier", sa.Integer(), nullable=False),
        sa.Column("trend", sa.Float(), nullable=True),
        sa.Column("new", sa.Boolean(), nullable=False),
        sa.Column("growing", sa.Boolean(), nullable=False),
        sa.Column("examples", JSONDoc, nullable=False),
        sa.PrimaryKeyConstraint("assistant", "mode_id", name=op.f("pk_failure_modes")),
    )
    op.create_table(
        "failure_mode_members",
        sa.Column("assistant", sa.String(256), nullable=False),
        sa.Column("event_id", sa.String(256), nullable=False),
        sa.Column("mode_id", sa.String(32), nullable=False),
        sa.Column("event_timestamp", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("assistant", "event_id", name=op.f("pk_failure_mode_members")),
    )
    op.create_index(
        op.f("ix_failure_mode_members_assistant_mode_id_event_timestamp"),
        "failure_mode_members",
        ["assistant", "mode_id", "event_timestamp"],
    )
    op.create_table(
        "failure_mode_runs",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("run_at", Timestamp, nullable=False),
        sa.Column("assistant", sa.String(256), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("recent_turns", sa.Integer(), nullable=False),
        sa.Column("grouped", sa.Integer(), nullable=False),
        sa.Column("unsorted", sa.Integer(), nullable=False),
        sa.Column("over_cap", sa.Integer(), nullable=False),
        sa.Column("modes", sa.Integer(), nullable=False),
        sa.Column("emerging", sa.Integer(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.CheckConstraint(
            "status IN ('grouped', 'too_few_turns')", name=op.f("ck_failure_mode_runs_status")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_failure_mode_runs")),
    )
    op.create_index(
        op.f("ix_failure_mode_runs_assistant_run_at"),
        "failure_mode_runs",
        ["assistant", "run_at"],
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_failure_mode_runs_assistant_run_at"), table_name="failure_mode_runs")
    op.drop_table("failure_mode_runs")
    op.drop_index(
        op.f("ix_failure_mode_members_assistant_mode_id_event_timestamp"),
        table_name="failure_mode_members",
    )
    op.drop_table("failure_mode_members")
    op.drop_table("failure_modes")
