"""each worker's presence row says what it offers (its capabilities), so a queued job whose
requirements no live worker meets is said to be so, instead of given a start time

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28 05:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("worker_presence", schema=None) as batch_op:
        batch_op.add_column(sa.Column("capabilities", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("worker_presence", schema=None) as batch_op:
        batch_op.drop_column("capabilities")
