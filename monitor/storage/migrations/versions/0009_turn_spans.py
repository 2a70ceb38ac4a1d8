"""The evaluated span of a turn read from OpenTelemetry traces: trace id and span id.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable: turns of casewatch's own event carry no span unless their producer sets one.
    op.add_column("turns", sa.Column("trace_id", sa.String(32), nullable=True))
    op.add_column("turns", sa.Column("span_id", sa.String(16), nullable=True))
    # From a trace in the tracing backend to its verdicts.
    op.create_index(op.f("ix_turns_trace_id"), "turns", ["trace_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_turns_trace_id"), table_name="turns")
    op.drop_column("turns", "span_id")
    op.drop_column("turns", "trace_id")
