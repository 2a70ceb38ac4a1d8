"""The judge watched: judge canary runs, and labelling batches drawn with unequal probabilities
(a batch's strategy, each drawn turn's inclusion probability).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types in monitor/storage/tables.py as of this revision.
JSONDoc = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "judge_canary_runs",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("judge", sa.String(256), nullable=False),
        sa.Column("config_hash", sa.String(128), nullable=False),
        sa.Column("run_at", Timestamp, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("agreement", sa.Float(), nullable=True),
        sa.Column("mean_score", sa.Float(), nullable=True),
        sa.Column("score_shift", sa.Float(), nullable=True),
        sa.Column("severe_calls", sa.Integer(), nullable=True),
        sa.Column("armed", sa.Boolean(), nullable=False),
        sa.Column("alarm", sa.Boolean(), nullable=False),
        sa.Column("statistic", sa.Float(), nullable=False),
        sa.Column("state", JSONDoc, nullable=False),
        sa.CheckConstraint("status IN ('ok', 'failed')", name=op.f("ck_judge_canary_runs_status")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judge_canary_runs")),
    )
    op.create_index(
        op.f("ix_judge_canary_runs_judge"),
        "judge_canary_runs",
        ["judge", "config_hash", "run_at"],
    )
    op.create_index(op.f("ix_judge_canary_runs_run_at"), "judge_canary_runs", ["run_at"])
    with op.batch_alter_table("label_batches") as batch:
        batch.add_column(
            sa.Column("strategy", sa.String(16), nullable=False, server_default="uniform")
        )
    with op.batch_alter_table("label_batch_items") as batch:
        batch.add_column(sa.Column("inclusion_probability", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("label_batch_items") as batch:
        batch.drop_column("inclusion_probability")
    with op.batch_alter_table("label_batches") as batch:
        batch.drop_column("strategy")
    op.drop_index(op.f("ix_judge_canary_runs_run_at"), table_name="judge_canary_runs")
    op.drop_index(op.f("ix_judge_canary_runs_judge"), table_name="judge_canary_runs")
    op.drop_table("judge_canary_runs")
