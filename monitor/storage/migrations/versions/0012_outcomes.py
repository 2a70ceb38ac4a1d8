"""Outcome events: end-user feedback and case outcomes, and the unsampled turns kept for them.

``outcome_events`` holds one row per outcome id (idempotent), with when it was joined to its
turn or case, expired unjoined, and paired with a verdict. ``retained_turns`` keeps unsampled
turns (redacted, bounded) so a negative feedback can get its turn judged once.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types in monitor/storage/tables.py as of this revision.
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "outcome_events",
        sa.Column("outcome_id", sa.String(256), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("signal_kind", sa.String(32), nullable=False),
        sa.Column("assistant_name", sa.String(256), nullable=False),
        sa.Column("turn_event_id", sa.String(256), nullable=True),
        sa.Column("conversation_id", sa.String(256), nullable=True),
        sa.Column("polarity", sa.String(8), nullable=True),
        sa.Column("thumbs", sa.String(4), nullable=True),
        sa.Column("rating", sa.Float(), nullable=True),
        sa.Column("scale_min", sa.Float(), nullable=True),
        sa.Column("scale_max", sa.Float(), nullable=True),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("event_timestamp", Timestamp, nullable=False),
        sa.Column("received_at", Timestamp, nullable=False),
        sa.Column("joined_at", Timestamp, nullable=True),
        sa.Column("expired_at", Timestamp, nullable=True),
        sa.Column("paired_at", Timestamp, nullable=True),
        sa.Column("agreement", sa.String(16), nullable=True),
        sa.PrimaryKeyConstraint("outcome_id", name="pk_outcome_events"),
    )
    op.create_index("ix_outcome_events_turn_event_id", "outcome_events", ["turn_event_id"])
    op.create_index("ix_outcome_events_conversation_id", "outcome_events", ["conversation_id"])
    op.create_index("ix_outcome_events_received_at", "outcome_events", ["received_at"])
    op.create_table(
        "retained_turns",
        sa.Column("event_id", sa.String(256), nullable=False),
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("assistant_name", sa.String(256), nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("retained_at", Timestamp, nullable=False),
        sa.Column("feedback_judged_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("event_id", name="pk_retained_turns"),
    )
    op.create_index("ix_retained_turns_conversation_id", "retained_turns", ["conversation_id"])
    op.create_index("ix_retained_turns_retained_at", "retained_turns", ["retained_at"])


def downgrade() -> None:
    op.drop_table("retained_turns")
    op.drop_table("outcome_events")
