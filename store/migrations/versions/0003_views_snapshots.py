"""views and snapshots: saved leaderboard views, a task's default view, frozen leaderboards

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 12:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "views",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("slug", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("weights", sa.JSON(), nullable=False),
        sa.Column("round_weights", sa.JSON(), nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"], name="fk_views_owner_id_users"),
        sa.ForeignKeyConstraint(["task"], ["tasks.name"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("task", "slug", name="uq_views_task_slug"),
    )
    with op.batch_alter_table("views", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_views_task"), ["task"], unique=False)

    op.create_table(
        "task_default_views",
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("view_id", sa.String(length=36), nullable=False),
        sa.Column("set_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["task"], ["tasks.name"]),
        sa.ForeignKeyConstraint(["view_id"], ["views.id"]),
        sa.PrimaryKeyConstraint("task"),
    )
    op.create_table(
        "snapshots",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("leaderboard", sa.JSON(), nullable=False),
        sa.Column("weights", sa.JSON(), nullable=False),
        sa.Column("round_weights", sa.JSON(), nullable=False),
        sa.Column("dataset_hashes", sa.JSON(), nullable=False),
        sa.Column("code_version", sa.String(length=128), nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"], name="fk_snapshots_owner_id_users"),
        sa.ForeignKeyConstraint(["task"], ["tasks.name"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("snapshots", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_snapshots_task"), ["task"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("snapshots", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_snapshots_task"))
    op.drop_table("snapshots")
    op.drop_table("task_default_views")
    with op.batch_alter_table("views", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_views_task"))
    op.drop_table("views")
