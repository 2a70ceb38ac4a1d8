"""The cascade: each judged turn's inclusion probability and the cheap look's cell.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable: a turn drawn by the uniform strategy (or stored before the cascade) has no
    # probability of its own; the weighted figures count it with weight 1.
    op.add_column("turns", sa.Column("inclusion_probability", sa.Float, nullable=True))
    op.add_column("turns", sa.Column("cheap_cell", sa.String(16), nullable=True))


def downgrade() -> None:
    op.drop_column("turns", "cheap_cell")
    op.drop_column("turns", "inclusion_probability")
