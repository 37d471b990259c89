"""webhook signing secrets are sealed at rest (store.sealing): the column grows to hold the
sealed form; the values themselves are sealed when a service opens, with the settings' key

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25 00:11:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("webhooks", schema=None) as batch_op:
        batch_op.alter_column(
            "secret", existing_type=sa.String(length=128), type_=sa.String(length=512)
        )


def downgrade() -> None:
    # Sealed values do not fit the old column, and an older version could not open them.
    op.execute("DELETE FROM webhook_deliveries")
    op.execute("DELETE FROM webhooks")
    with op.batch_alter_table("webhooks", schema=None) as batch_op:
        batch_op.alter_column(
            "secret", existing_type=sa.String(length=512), type_=sa.String(length=128)
        )
