"""The review queue: tasks pushed to the annotation server and annotations pulled back.

``review_tasks``: each turn queued for people (in a labelling batch) and the server task it
became (NULL while in the backlog). ``review_annotations``: each annotation version pulled, and
whether it was stored as labels or refused (with the reason), so a pull acts on it once.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types in monitor/storage/tables.py as of this revision.
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "review_tasks",
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.Column("event_id", sa.String(256), nullable=False),
        sa.Column("reason", sa.String(16), nullable=False),
        sa.Column("queued_at", Timestamp, nullable=False),
        sa.Column("project_id", sa.BigInteger(), nullable=True),
        sa.Column("task_id", sa.BigInteger(), nullable=True),
        sa.Column("pushed_at", Timestamp, nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["batch_id"],
            ["label_batches.id"],
            name=op.f("fk_review_tasks_batch_id_label_batches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("batch_id", "event_id", name=op.f("pk_review_tasks")),
    )
    op.create_index("ix_review_tasks_task_id", "review_tasks", ["task_id"])
    op.create_table(
        "review_annotations",
        sa.Column("project_id", sa.BigInteger(), nullable=False),
        sa.Column("annotation_id", sa.BigInteger(), nullable=False),
        sa.Column("task_id", sa.BigInteger(), nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("pulled_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("project_id", "annotation_id", name=op.f("pk_review_annotations")),
    )


def downgrade() -> None:
    op.drop_table("review_annotations")
    op.drop_index("ix_review_tasks_task_id", table_name="review_tasks")
    op.drop_table("review_tasks")
