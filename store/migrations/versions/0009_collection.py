"""collection: rounds open for writing, collected examples with the live model's answer,
validation votes, and a job priority (backfills wait for new submissions)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23 21:45:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("priority", sa.Integer(), nullable=False, server_default="0"))
    op.create_table(
        "collection_rounds",
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("round", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("model_ids", sa.JSON(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("unhealthy", sa.JSON(), nullable=False),
        sa.Column("opened_by", sa.String(length=36), nullable=True),
        sa.Column("opened_at", sa.DateTime(), nullable=False),
        sa.Column("frozen_at", sa.DateTime(), nullable=True),
        sa.Column("frozen_sha256", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["opened_by"], ["users.id"], name="fk_collection_rounds_opened_by_users"
        ),
        sa.PrimaryKeyConstraint("task", "round"),
    )
    op.create_table(
        "collected_examples",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("round", sa.String(length=64), nullable=False),
        sa.Column("origin", sa.String(length=16), nullable=False),
        sa.Column("author_id", sa.String(length=36), nullable=True),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("intended", sa.JSON(), nullable=False),
        sa.Column("explanation", sa.Text(), nullable=True),
        sa.Column("model_id", sa.String(length=36), nullable=True),
        sa.Column("model_answer", sa.JSON(), nullable=True),
        sa.Column("fooled", sa.Boolean(), nullable=True),
        sa.Column("answer_error", sa.String(length=300), nullable=True),
        sa.Column("fooled_models", sa.JSON(), nullable=True),
        sa.Column("source_uid", sa.String(length=128), nullable=True),
        sa.Column("verdict", sa.String(length=16), nullable=True),
        sa.Column("settled_by", sa.String(length=36), nullable=True),
        sa.Column("settled_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["author_id"], ["users.id"], name="fk_collected_examples_author_id_users"
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("collected_examples", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_collected_examples_author_id"), ["author_id"], unique=False
        )
        batch_op.create_index("ix_collected_examples_round", ["task", "round"], unique=False)
    op.create_table(
        "validation_votes",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("example_id", sa.String(length=36), nullable=False),
        sa.Column("voter_id", sa.String(length=36), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["example_id"], ["collected_examples.id"], name="fk_validation_votes_example_id"
        ),
        sa.ForeignKeyConstraint(
            ["voter_id"], ["users.id"], name="fk_validation_votes_voter_id_users"
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("example_id", "voter_id", name="uq_validation_votes_voter"),
    )
    with op.batch_alter_table("validation_votes", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_validation_votes_example_id"), ["example_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("validation_votes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_validation_votes_example_id"))
    op.drop_table("validation_votes")
    with op.batch_alter_table("collected_examples", schema=None) as batch_op:
        batch_op.drop_index("ix_collected_examples_round")
        batch_op.drop_index(batch_op.f("ix_collected_examples_author_id"))
    op.drop_table("collected_examples")
    op.drop_table("collection_rounds")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("priority")
