"""idempotent submissions: a model row keeps its client's Idempotency-Key, unique per
submitter, so a repeated upload (a retry after a client timeout) is the first submission

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25 00:13:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.add_column(sa.Column("idempotency_key", sa.String(length=128), nullable=True))
        batch_op.create_unique_constraint(
            "uq_models_owner_idempotency_key", ["owner_id", "idempotency_key"]
        )


def downgrade() -> None:
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.drop_constraint("uq_models_owner_idempotency_key", type_="unique")
        batch_op.drop_column("idempotency_key")
