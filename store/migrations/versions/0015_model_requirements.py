"""model requirements: what a submission needs of the worker that runs it (GPUs, CPUs,
memory, a GPU model, labels); only a worker that meets them claims its jobs

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26 00:15:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.add_column(sa.Column("requirements", sa.JSON(), nullable=True))
        batch_op.add_column(
            sa.Column("required_gpus", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.drop_column("required_gpus")
        batch_op.drop_column("requirements")
