"""Failure modes of cases beside those of turns: a ``unit`` column ('turn' or 'case') on the
modes, their members and the runs. Rows written before are turns' (the server default). A
case member's ``event_id`` holds its conversation id, so the members' key takes the unit.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UNITS = "unit IN ('turn', 'case')"


def _unit() -> sa.Column[str]:
    return sa.Column("unit", sa.String(8), nullable=False, server_default="turn")


def upgrade() -> None:
    with op.batch_alter_table("failure_modes") as batch:
        batch.add_column(_unit())
        batch.create_check_constraint(op.f("ck_failure_modes_unit"), UNITS)
    with op.batch_alter_table("failure_mode_runs") as batch:
        batch.add_column(_unit())
        batch.create_check_constraint(op.f("ck_failure_mode_runs_unit"), UNITS)
    with op.batch_alter_table("failure_mode_members") as batch:
        batch.add_column(_unit())
        batch.drop_constraint("pk_failure_mode_members", type_="primary")
        batch.create_primary_key("pk_failure_mode_members", ["assistant", "unit", "event_id"])
        batch.create_check_constraint(op.f("ck_failure_mode_members_unit"), UNITS)
        batch.drop_index("ix_failure_mode_members_assistant_mode_id_event_timestamp")
        batch.create_index(
            "ix_failure_mode_members_assistant_unit_mode_id_event_timestamp",
            ["assistant", "unit", "mode_id", "event_timestamp"],
        )


def downgrade() -> None:
    op.execute(sa.text("DELETE FROM failure_mode_members WHERE unit = 'case'"))
    op.execute(sa.text("DELETE FROM failure_modes WHERE unit = 'case'"))
    op.execute(sa.text("DELETE FROM failure_mode_runs WHERE unit = 'case'"))
    with op.batch_alter_table("failure_mode_members") as batch:
        batch.drop_index("ix_failure_mode_members_assistant_unit_mode_id_event_timestamp")
        batch.drop_constraint(op.f("ck_failure_mode_members_unit"), type_="check")
        batch.drop_constraint("pk_failure_mode_members", type_="primary")
        batch.create_primary_key("pk_failure_mode_members", ["assistant", "event_id"])
        batch.drop_column("unit")
        batch.create_index(
            "ix_failure_mode_members_assistant_mode_id_event_timestamp",
            ["assistant", "mode_id", "event_timestamp"],
        )
    for table in ("failure_mode_runs", "failure_modes"):
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(op.f(f"ck_{table}_unit"), type_="check")
            batch.drop_column("unit")
