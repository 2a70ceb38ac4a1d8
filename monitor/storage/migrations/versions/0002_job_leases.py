"""Job leases: one row per scheduled job, held by the replica that runs it.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "job_leases",
        sa.Column("job", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(256), nullable=False),
        sa.Column("acquired_at", Timestamp, nullable=False),
        sa.Column("expires_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("job", name=op.f("pk_job_leases")),
    )


def downgrade() -> None:
    op.drop_table("job_leases")
