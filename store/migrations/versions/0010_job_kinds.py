"""job kinds and scopes: a backfill job scores one dataset and keeps the rest of the model's
result; an adversary job belongs to a round, not a model, and checkpoints its progress; a
model row says when its image is gone

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24 00:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("kind", sa.String(length=16), nullable=False, server_default="evaluate")
        )
        batch_op.add_column(sa.Column("spec", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("checkpoint", sa.JSON(), nullable=True))
        batch_op.alter_column("model_id", existing_type=sa.String(length=36), nullable=True)
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.add_column(sa.Column("image_gone_at", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("image_gone", sa.String(length=300), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.drop_column("image_gone")
        batch_op.drop_column("image_gone_at")
    op.execute(
        "DELETE FROM job_attempts WHERE job_id IN (SELECT id FROM jobs WHERE model_id IS NULL)"
    )
    op.execute("DELETE FROM jobs WHERE model_id IS NULL")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.alter_column("model_id", existing_type=sa.String(length=36), nullable=False)
        batch_op.drop_column("checkpoint")
        batch_op.drop_column("spec")
        batch_op.drop_column("kind")
