"""resumable uploads: an image sent in parts over many requests, resumed after a dropped
connection, then submitted; its parts live in the blob store until it is finished

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26 00:16:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "uploads",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=True),
        sa.Column("filename", sa.String(length=255), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("part_bytes", sa.Integer(), nullable=False),
        sa.Column("blob_key", sa.String(length=512), nullable=False),
        sa.Column("handle", sa.String(length=1024), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("model_id", sa.String(length=36), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("uploads", schema=None) as batch_op:
        batch_op.create_index("ix_uploads_owner_id", ["owner_id"], unique=False)
        batch_op.create_index("ix_uploads_expires_at", ["expires_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("uploads", schema=None) as batch_op:
        batch_op.drop_index("ix_uploads_expires_at")
        batch_op.drop_index("ix_uploads_owner_id")
    op.drop_table("uploads")
