"""Case labels: people's bands for whole cases, in case labelling batches drawn uniformly
from an assistant's scored cases (``casewatch labels export --cases``); and which case verdicts
the case detectors have observed.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types in monitor/storage/tables.py as of this revision.
JSONDoc = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "case_label_batches",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("assistant", sa.String(256), nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("frame_start", Timestamp, nullable=True),
        sa.Column("frame_end", Timestamp, nullable=True),
        sa.Column("population", sa.Integer(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_case_label_batches")),
    )
    op.create_table(
        "case_label_items",
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("judge_bands", JSONDoc, nullable=False),
        sa.ForeignKeyConstraint(
            ["batch_id"],
            ["case_label_batches.id"],
            name=op.f("fk_case_label_items_batch_id_case_label_batches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("batch_id", "conversation_id", name=op.f("pk_case_label_items")),
    )
    op.create_table(
        "case_labels",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("band", sa.String(16), nullable=False),
        sa.Column("labeller", sa.String(256), nullable=False),
        sa.Column("labelled_at", Timestamp, nullable=False),
        sa.Column("imported_at", Timestamp, nullable=False),
        sa.CheckConstraint(
            "band IN ('severe', 'moderate', 'minor', 'none')", name=op.f("ck_case_labels_band")
        ),
        sa.ForeignKeyConstraint(
            ["batch_id"],
            ["case_label_batches.id"],
            name=op.f("fk_case_labels_batch_id_case_label_batches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_case_labels")),
        sa.UniqueConstraint(
            "batch_id",
            "conversation_id",
            "metric",
            "labeller",
            name=op.f("uq_case_labels_batch_id_conversation_id_metric_labeller"),
        ),
    )
    op.create_table(
        "case_verdict_observations",
        sa.Column("case_verdict_id", BigId, autoincrement=False, nullable=False),
        sa.Column("observed_at", Timestamp, nullable=False),
        sa.ForeignKeyConstraint(
            ["case_verdict_id"],
            ["case_verdicts.id"],
            name=op.f("fk_case_verdict_observations_case_verdict_id_case_verdicts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("case_verdict_id", name=op.f("pk_case_verdict_observations")),
    )


def downgrade() -> None:
    op.drop_table("case_verdict_observations")
    op.drop_table("case_labels")
    op.drop_table("case_label_items")
    op.drop_table("case_label_batches")
