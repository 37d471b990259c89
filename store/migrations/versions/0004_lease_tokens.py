"""lease tokens: a token and a lock domain per claim, platform faults counted per job

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 15:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lease_token", sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column("lease_domain", sa.String(length=36), nullable=True))
        batch_op.add_column(
            sa.Column("platform_faults", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.create_index(batch_op.f("ix_jobs_lease_token"), ["lease_token"], unique=False)
    with op.batch_alter_table("job_attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lease_token", sa.String(length=36), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_job_attempts_lease_token"), ["lease_token"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("job_attempts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_attempts_lease_token"))
        batch_op.drop_column("lease_token")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_lease_token"))
        batch_op.drop_column("platform_faults")
        batch_op.drop_column("lease_domain")
        batch_op.drop_column("lease_token")
