"""rounds and datasets added through the API, stored by content hash

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23 21:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "task_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("seed_hash", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("task", "version", name="uq_task_versions_task_version"),
    )
    op.create_table(
        "task_datasets",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("round", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("blob_key", sa.String(length=512), nullable=False),
        sa.Column("examples", sa.Integer(), nullable=False),
        sa.Column("task_version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("task", "round", "name", "version", name="uq_task_datasets_version"),
    )
    with op.batch_alter_table("task_datasets", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_task_datasets_task"), ["task"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("task_datasets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_task_datasets_task"))
    op.drop_table("task_datasets")
    op.drop_table("task_versions")
