"""Unsampled turns read from Kafka kept as their records' places a batch at a time
(``retained_places``: one row per partition per batch, the turns' ids and offsets as JSON
lists), found and copied into ``retained_turns`` only when an outcome asks for one.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A frozen copy of the column type in monitor/storage/tables.py as of this revision.
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "retained_places",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=True),
        sa.Column("source_topic", sa.String(256), nullable=False),
        sa.Column("source_partition", sa.Integer, nullable=False),
        sa.Column("turns", sa.Integer, nullable=False),
        sa.Column("event_ids", sa.Text, nullable=False),
        sa.Column("conversation_ids", sa.Text, nullable=False),
        sa.Column("assistants", sa.Text, nullable=False),
        sa.Column("offsets", sa.Text, nullable=False),
        sa.Column("retained_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_retained_places"),
    )
    op.create_index("ix_retained_places_retained_at", "retained_places", ["retained_at"])


def downgrade() -> None:
    op.drop_index("ix_retained_places_retained_at", table_name="retained_places")
    op.drop_table("retained_places")
