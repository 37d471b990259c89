"""worker presence: each worker's latest sign of life, idle ones included, for /metrics

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25 00:12:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "worker_presence",
        sa.Column("worker_id", sa.String(length=128), nullable=False),
        sa.Column("seen_at", sa.DateTime(), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=True),
        sa.PrimaryKeyConstraint("worker_id"),
    )


def downgrade() -> None:
    op.drop_table("worker_presence")
