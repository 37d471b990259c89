"""SQLAlchemy 2 tables. Only the persistence layer turns these rows into objects."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from configs.vocabulary.results import ScoreKey

SCORE_KEY_COLUMNS = tuple(field.name for field in dataclasses.fields(ScoreKey))


class Base(DeclarativeBase):
    """Declarative base; metadata feeds Alembic."""


class TaskRow(Base):
    """A registered task and the spec it was registered with."""

    __tablename__ = "tasks"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    spec: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime]
    # Who runs the task (its rounds, reruns) and whether outsiders may see it at all.
    owner_id: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", name="fk_tasks_owner_id_users"), index=True
    )
    private: Mapped[bool] = mapped_column(Boolean, default=False)


class ModelRow(Base):
    """A submitted model: how to run it (runtime spec), pinned where possible by digest."""

    __tablename__ = "models"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    task: Mapped[str] = mapped_column(ForeignKey("tasks.name"), index=True)
    name: Mapped[str] = mapped_column(String(128))
    runtime: Mapped[dict] = mapped_column(JSON)
    image_id: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime]
    # The submitter; None for rows from before accounts existed (visible to admins only).
    owner_id: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", name="fk_models_owner_id_users"), index=True
    )


class JobRow(Base):
    """One evaluation job: the queue entry with its lease, progress and outcome."""

    __tablename__ = "jobs"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id"), index=True)
    task: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    # attempts that ended through the platform's fault (lost worker, platform error)
    platform_faults: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    available_at: Mapped[datetime]
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    # Each claim's own random token: two live workers sharing an id never share a lease.
    lease_token: Mapped[str | None] = mapped_column(String(36), index=True)
    # The claiming worker's lock folder (worker.lock): its restart may settle the job at once.
    lease_domain: Mapped[str | None] = mapped_column(String(36))
    lease_expires_at: Mapped[datetime | None]
    heartbeat_at: Mapped[datetime | None]
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    stage: Mapped[str] = mapped_column(String(200), default="")
    failure_code: Mapped[str | None] = mapped_column(String(64))
    failure_message: Mapped[str | None] = mapped_column(Text)
    log_tail: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    __table_args__ = (Index("ix_jobs_status_available", "status", "available_at"),)


class AttemptRow(Base):
    """One attempt at a job: which worker, how it ended, why."""

    __tablename__ = "job_attempts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    worker: Mapped[str] = mapped_column(String(128))
    # the claim's (see JobRow): which attempt a sandbox labelled with it belonged to
    lease_token: Mapped[str | None] = mapped_column(String(36), index=True)
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    outcome: Mapped[str | None] = mapped_column(String(16))
    failure_code: Mapped[str | None] = mapped_column(String(64))
    failure_message: Mapped[str | None] = mapped_column(Text)


class ResultRow(Base):
    """The summary of a finished evaluation: axes, rounds, slices, profile, provenance."""

    __tablename__ = "results"
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), primary_key=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id"), index=True)
    task: Mapped[str] = mapped_column(String(64), index=True)
    summary: Mapped[dict] = mapped_column(JSON)
    rounds: Mapped[list] = mapped_column(JSON)
    slices: Mapped[list] = mapped_column(JSON)
    profile: Mapped[dict] = mapped_column(JSON)
    provenance: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime]


class ScoreRow(Base):
    """One number under its full key; the unique constraint is the ScoreKey itself."""

    __tablename__ = "scores"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id"), index=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"))
    task: Mapped[str] = mapped_column(String(64))
    round: Mapped[str] = mapped_column(String(64))
    dataset: Mapped[str] = mapped_column(String(128))
    dataset_hash: Mapped[str] = mapped_column(String(64))
    variant: Mapped[str] = mapped_column(String(64))
    variant_version: Mapped[str] = mapped_column(String(32))
    seed: Mapped[int] = mapped_column(Integer)
    slice: Mapped[str] = mapped_column(String(200))
    metric: Mapped[str] = mapped_column(String(64))
    value: Mapped[float | None] = mapped_column(Float)
    n: Mapped[int] = mapped_column(Integer)
    ci_low: Mapped[float | None] = mapped_column(Float)
    ci_high: Mapped[float | None] = mapped_column(Float)
    __table_args__ = (
        # The ScoreKey itself (per model): two sets of one round can never overwrite each other.
        UniqueConstraint("model_id", *SCORE_KEY_COLUMNS, name="uq_scores_key"),
    )


class UserRow(Base):
    """An account: a role, and a password hash (argon2) for the page login, if any."""

    __tablename__ = "users"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    password_hash: Mapped[str | None] = mapped_column(String(256))
    created_at: Mapped[datetime]


class TokenRow(Base):
    """An API token or a login session: only the secret's sha256 is stored."""

    __tablename__ = "api_tokens"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    kind: Mapped[str] = mapped_column(String(16))  # "api" or "session"
    name: Mapped[str] = mapped_column(String(128))
    prefix: Mapped[str] = mapped_column(String(16))  # shown in listings to tell tokens apart
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    scopes: Mapped[str] = mapped_column(String(64))  # space-separated
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
    last_used_at: Mapped[datetime | None]


class ViewRow(Base):
    """A saved leaderboard view: named axis and round weights for a task, with a slug."""

    __tablename__ = "views"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    task: Mapped[str] = mapped_column(ForeignKey("tasks.name"), index=True)
    slug: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(128))
    weights: Mapped[dict] = mapped_column(JSON)
    round_weights: Mapped[dict] = mapped_column(JSON)
    owner_id: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", name="fk_views_owner_id_users")
    )
    created_at: Mapped[datetime]
    __table_args__ = (UniqueConstraint("task", "slug", name="uq_views_task_slug"),)


class TaskDefaultViewRow(Base):
    """The view a task's leaderboard uses when the viewer gives no weights."""

    __tablename__ = "task_default_views"
    task: Mapped[str] = mapped_column(ForeignKey("tasks.name"), primary_key=True)
    view_id: Mapped[str] = mapped_column(ForeignKey("views.id"))
    set_at: Mapped[datetime]


class SnapshotRow(Base):
    """A frozen leaderboard: its JSON as it was, never recomputed."""

    __tablename__ = "snapshots"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    task: Mapped[str] = mapped_column(ForeignKey("tasks.name"), index=True)
    leaderboard: Mapped[dict] = mapped_column(JSON)
    weights: Mapped[dict] = mapped_column(JSON)
    round_weights: Mapped[dict] = mapped_column(JSON)
    dataset_hashes: Mapped[dict] = mapped_column(JSON)
    code_version: Mapped[str] = mapped_column(String(128))
    owner_id: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", name="fk_snapshots_owner_id_users")
    )
    created_at: Mapped[datetime]
