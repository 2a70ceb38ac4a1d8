"""Initial schema: turns, verdicts (unique on event_id + judge_config_hash), judgments.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types in monitor/storage/tables.py as of this revision.
JSONDoc = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite autoincrements INTEGER only
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "turns",
        sa.Column("event_id", sa.String(256), nullable=False),
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("turn_index", sa.Integer(), nullable=False),
        sa.Column("assistant_name", sa.String(256), nullable=False),
        sa.Column("assistant_version", sa.String(128), nullable=False),
        sa.Column("assistant_model", sa.String(256), nullable=False),
        sa.Column("event_timestamp", Timestamp, nullable=False),
        sa.Column("event", JSONDoc, nullable=False),
        sa.Column("stored_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("event_id", name=op.f("pk_turns")),
    )
    op.create_index(
        op.f("ix_turns_assistant_name_event_timestamp"),
        "turns",
        ["assistant_name", "event_timestamp"],
    )
    op.create_index(op.f("ix_turns_conversation_id"), "turns", ["conversation_id"])
    op.create_index(op.f("ix_turns_stored_at"), "turns", ["stored_at"])

    op.create_table(
        "verdicts",
        sa.Column("id", BigId, nullable=False),
        sa.Column("event_id", sa.String(256), nullable=False),
        sa.Column("judge_config_hash", sa.String(128), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("weight_profile", sa.Text(), nullable=False),
        sa.Column("s_final", sa.Float(), nullable=True),
        sa.Column("final_band", sa.String(16), nullable=True),
        sa.Column("turn_band", sa.String(16), nullable=True),
        sa.Column("metric_scores", JSONDoc, nullable=False),
        sa.Column("metric_bands", JSONDoc, nullable=False),
        sa.Column("arbitrated", sa.Boolean(), nullable=False),
        sa.Column("arbitration_trigger", sa.Text(), nullable=True),
        sa.Column("stored_at", Timestamp, nullable=False),
        sa.CheckConstraint("status IN ('ok', 'judge_failed')", name=op.f("ck_verdicts_status")),
        sa.ForeignKeyConstraint(
            ["event_id"], ["turns.event_id"], name=op.f("fk_verdicts_event_id_turns")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_verdicts")),
        sa.UniqueConstraint(
            "event_id",
            "judge_config_hash",
            name=op.f("uq_verdicts_event_id_judge_config_hash"),
        ),
    )
    op.create_index(op.f("ix_verdicts_stored_at"), "verdicts", ["stored_at"])

    op.create_table(
        "judgments",
        sa.Column("id", BigId, nullable=False),
        sa.Column("verdict_id", BigId, nullable=False),
        sa.Column("judge", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("failure_detail", sa.Text(), nullable=True),
        sa.Column("scores", JSONDoc, nullable=True),
        sa.Column("raw_output", sa.Text(), nullable=True),
        sa.Column("prompt_version", sa.Text(), nullable=False),
        sa.Column("prompt_hash", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("latency_seconds", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["verdict_id"],
            ["verdicts.id"],
            name=op.f("fk_judgments_verdict_id_verdicts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judgments")),
    )
    op.create_index(op.f("ix_judgments_verdict_id"), "judgments", ["verdict_id"])


def downgrade() -> None:
    op.drop_table("judgments")
    op.drop_table("verdicts")
    op.drop_table("turns")
