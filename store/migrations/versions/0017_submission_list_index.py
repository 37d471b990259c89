"""the submissions list's order as an index: newest first by (created_at, id), so a page
of the list reads its own rows instead of sorting every model

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26 00:17:00
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.create_index("ix_models_created_at_id", ["created_at", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.drop_index("ix_models_created_at_id")
