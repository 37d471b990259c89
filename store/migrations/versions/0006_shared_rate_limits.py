"""rate-limit buckets shared by every API process

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 21:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rate_limit_buckets",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("updated_s", sa.Float(), nullable=False),
        sa.Column("granted", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    with op.batch_alter_table("rate_limit_buckets", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_rate_limit_buckets_updated_s"), ["updated_s"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("rate_limit_buckets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_rate_limit_buckets_updated_s"))
    op.drop_table("rate_limit_buckets")
