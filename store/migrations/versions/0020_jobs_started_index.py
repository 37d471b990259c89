"""every claim counts the jobs each submitter and task started in the fair-share window
(store.claims): an index on jobs.started_at finds them without reading the whole history of
jobs, which grows with every evaluation ever run

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27 06:00:00
"""

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index("ix_jobs_started_at", ["started_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_started_at")
