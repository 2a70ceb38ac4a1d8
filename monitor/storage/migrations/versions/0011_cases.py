"""Cases: conversations judged as a whole, one verdict per (assistant, conversation, version),
and each case judge's answer for audit.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types in monitor/storage/tables.py as of this revision.
JSONDoc = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "case_verdicts",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("assistant_name", sa.String(256), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("failures_in_row", sa.Integer(), nullable=False),
        sa.Column("close_reason", sa.String(16), nullable=False),
        sa.Column("judge_config_hash", sa.String(128), nullable=False),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("turns_cut", sa.Integer(), nullable=False),
        sa.Column("covered_until", Timestamp, nullable=False),
        sa.Column("case_score", sa.Float(), nullable=True),
        sa.Column("case_band", sa.String(16), nullable=True),
        sa.Column("resolution_outcome", sa.String(16), nullable=True),
        sa.Column("metric_scores", JSONDoc, nullable=False),
        sa.Column("metric_bands", JSONDoc, nullable=False),
        sa.Column("turn_mean_s_final", sa.Float(), nullable=True),
        sa.Column("arbitrated", sa.Boolean(), nullable=False),
        sa.Column("arbitration_trigger", sa.Text(), nullable=True),
        sa.Column("judged_at", Timestamp, nullable=False),
        sa.CheckConstraint(
            "status IN ('ok', 'judge_failed')", name=op.f("ck_case_verdicts_status")
        ),
        sa.CheckConstraint(
            "close_reason IN ('idle', 'ended')", name=op.f("ck_case_verdicts_close_reason")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_case_verdicts")),
        sa.UniqueConstraint(
            "assistant_name",
            "conversation_id",
            "version",
            name=op.f("uq_case_verdicts_assistant_name_conversation_id_version"),
        ),
    )
    op.create_index(
        op.f("ix_case_verdicts_assistant_name_judged_at"),
        "case_verdicts",
        ["assistant_name", "judged_at"],
    )
    op.create_index(op.f("ix_case_verdicts_judged_at"), "case_verdicts", ["judged_at"])
    op.create_index(op.f("ix_case_verdicts_conversation_id"), "case_verdicts", ["conversation_id"])
    op.create_table(
        "case_judgments",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("case_verdict_id", BigId, nullable=False),
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
            ["case_verdict_id"],
            ["case_verdicts.id"],
            name=op.f("fk_case_judgments_case_verdict_id_case_verdicts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_case_judgments")),
    )
    op.create_index(
        op.f("ix_case_judgments_case_verdict_id"), "case_judgments", ["case_verdict_id"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_case_judgments_case_verdict_id"), table_name="case_judgments")
    op.drop_table("case_judgments")
    op.drop_index(op.f("ix_case_verdicts_conversation_id"), table_name="case_verdicts")
    op.drop_index(op.f("ix_case_verdicts_judged_at"), table_name="case_verdicts")
    op.drop_index(op.f("ix_case_verdicts_assistant_name_judged_at"), table_name="case_verdicts")
    op.drop_table("case_verdicts")
