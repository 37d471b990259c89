"""collected slices: a written example keeps the slice values its writer gave (a frozen
set carries them as written instead of "unspecified")

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26 00:14:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("collected_examples", schema=None) as batch_op:
        batch_op.add_column(sa.Column("slices", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("collected_examples", schema=None) as batch_op:
        batch_op.drop_column("slices")
