"""Where an unsampled turn read from Kafka is: kept as its record's place (topic, partition,
offset) instead of its redacted text, and read back from Kafka when feedback asks for it.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("retained_turns", sa.Column("source_topic", sa.String(256)))
    op.add_column("retained_turns", sa.Column("source_partition", sa.Integer))
    op.add_column("retained_turns", sa.Column("source_offset", sa.BigInteger))


def downgrade() -> None:
    with op.batch_alter_table("retained_turns") as batch:
        batch.drop_column("source_offset")
        batch.drop_column("source_partition")
        batch.drop_column("source_topic")
