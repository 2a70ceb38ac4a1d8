"""Operator views and human labels: the ``turn_verdicts`` view (one row per judged turn, for
runbook queries and the turns dashboard) and labelling batches with their human labels.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types in monitor/storage/tables.py as of this revision.
JSONDoc = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)

# Frozen here too: the view must keep meaning what it meant when written.
METRICS = (
    "hallucination",
    "retrieval_correctness",
    "context_sufficiency",
    "answer_helpfulness",
    "answer_type_fit",
    "identifier_integrity",
    "case_issue_identification",
    "resolution_alignment",
)


def _view_sql(dialect: str) -> str:
    """One row per turn with a verdict: its newest verdict (the current judge configuration's),
    bands and final scores per metric, and per metric the justification of the judge that
    scored it lowest (the reason behind a bad band)."""
    cols = []
    for m in METRICS:
        if dialect == "postgresql":
            band = f"v.metric_bands ->> '{m}'"
            score = f"(v.metric_scores ->> '{m}')::float8"
            why = (
                f"(SELECT j.scores -> '{m}' ->> 'justification' FROM judgments j "
                f"WHERE j.verdict_id = v.id AND j.scores IS NOT NULL "
                f"ORDER BY (j.scores -> '{m}' ->> 'score')::float8, j.id LIMIT 1)"
            )
        else:
            band = f"json_extract(v.metric_bands, '$.{m}')"
            score = f"CAST(json_extract(v.metric_scores, '$.{m}') AS REAL)"
            why = (
                f"(SELECT json_extract(j.scores, '$.{m}.justification') FROM judgments j "
                f"WHERE j.verdict_id = v.id AND j.scores IS NOT NULL "
                f"ORDER BY CAST(json_extract(j.scores, '$.{m}.score') AS REAL), j.id LIMIT 1)"
            )
        cols += [f"{band} AS band_{m}", f"{score} AS score_{m}", f"{why} AS why_{m}"]
    metric_cols = ",\n  ".join(cols)
    return f"""CREATE VIEW turn_verdicts AS
SELECT
  t.event_id,
  t.conversation_id,
  t.turn_index,
  t.assistant_name AS assistant,
  t.assistant_version,
  t.event_timestamp AS event_time,
  v.stored_at AS judged_at,
  v.status,
  v.failure_reason,
  v.s_final,
  v.final_band,
  v.turn_band,
  v.arbitrated,
  v.arbitration_trigger,
  v.judge_config_hash,
  {metric_cols}
FROM turns t
JOIN verdicts v ON v.event_id = t.event_id
WHERE NOT EXISTS (SELECT 1 FROM verdicts newer WHERE newer.event_id = v.event_id AND newer.id > v.id)"""


def upgrade() -> None:
    op.execute(_view_sql(op.get_context().dialect.name))
    op.create_table(
        "label_batches",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("assistant", sa.String(256), nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("frame_start", Timestamp, nullable=True),
        sa.Column("frame_end", Timestamp, nullable=True),
        sa.Column("population", sa.Integer(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_label_batches")),
    )
    op.create_table(
        "label_batch_items",
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.Column("event_id", sa.String(256), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("judge_bands", JSONDoc, nullable=False),
        sa.ForeignKeyConstraint(
            ["batch_id"],
            ["label_batches.id"],
            name=op.f("fk_label_batch_items_batch_id_label_batches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("batch_id", "event_id", name=op.f("pk_label_batch_items")),
    )
    op.create_table(
        "human_labels",
        sa.Column("id", BigId, nullable=False),
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.Column("event_id", sa.String(256), nullable=False),
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("band", sa.String(16), nullable=False),
        sa.Column("labeller", sa.String(256), nullable=False),
        sa.Column("labelled_at", Timestamp, nullable=False),
        sa.Column("imported_at", Timestamp, nullable=False),
        sa.CheckConstraint(
            "band IN ('severe', 'moderate', 'minor', 'none')", name=op.f("ck_human_labels_band")
        ),
        sa.ForeignKeyConstraint(
            ["batch_id"],
            ["label_batches.id"],
            name=op.f("fk_human_labels_batch_id_label_batches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_human_labels")),
        sa.UniqueConstraint(
            "batch_id",
            "event_id",
            "metric",
            "labeller",
            name=op.f("uq_human_labels_batch_id_event_id_metric_labeller"),
        ),
    )


def downgrade() -> None:
    op.drop_table("human_labels")
    op.drop_table("label_batch_items")
    op.drop_table("label_batches")
    op.execute("DROP VIEW turn_verdicts")
