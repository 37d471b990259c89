"""SQLAlchemy 2 tables. Only the persistence layer turns these rows into objects."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from configs.vocabulary.results import RoundRow, ScoreKey, SliceRow
from configs.vocabulary.runtimes import StoredRuntime

SCORE_KEY_COLUMNS = tuple(field.name for field in dataclasses.fields(ScoreKey))


class Base(DeclarativeBase):
    """Declarative base; metadata feeds Alembic."""


class TaskRow(Base):
    """A registered task and the spec it was registered with."""

    __tablename__ = "tasks"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
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
    runtime: Mapped[StoredRuntime] = mapped_column(JSON)
    image_id: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime]
    # The submitter; None for rows from before accounts existed (visible to admins only).
    owner_id: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", name="fk_models_owner_id_users"), index=True
    )
    # The submitter's decision to make the model's page and full scores public.
    published: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")
    # Set when the image can no longer be run (retention removed it, or it vanished): the
    # model keeps its scores and its place, and backfills skip it, saying so.
    image_gone_at: Mapped[datetime | None]
    image_gone: Mapped[str | None] = mapped_column(String(300))
    # The client's Idempotency-Key: a repeat by the same submitter is the first submission.
    idempotency_key: Mapped[str | None] = mapped_column(String(128))
    # What the worker that runs it must have (configs.vocabulary.capabilities), or None;
    # its GPU count apart, so claims filter on it in SQL.
    requirements: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    required_gpus: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    __table_args__ = (
        UniqueConstraint("owner_id", "idempotency_key", name="uq_models_owner_idempotency_key"),
        # the submissions list's order and cursor: a page reads its rows, not every row
        Index("ix_models_created_at_id", "created_at", "id"),
        # a board's results marks count a task's gone images per request: only those rows
        Index(
            "ix_models_task_image_gone",
            "task",
            sqlite_where=text("image_gone_at IS NOT NULL"),
            postgresql_where=text("image_gone_at IS NOT NULL"),
        ),
    )


class JobRow(Base):
    """One evaluation job: the queue entry with its lease, progress and outcome."""

    __tablename__ = "jobs"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    # None for a job of a round rather than a model (an adversary run).
    model_id: Mapped[str | None] = mapped_column(ForeignKey("models.id"), index=True)
    task: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16), default="evaluate", server_default="evaluate")
    # What the kind needs: a backfill's scope (one dataset version), an attack's settings.
    spec: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Progress a later attempt resumes from (an attack's next source, its queries used).
    checkpoint: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    # attempts that ended through the platform's fault (lost worker, platform error)
    platform_faults: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Claimed highest first: a backfill (an old model on new data) waits for submissions.
    priority: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
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
    # indexed: every claim counts the jobs started in the fair-share window (store.claims)
    started_at: Mapped[datetime | None] = mapped_column(index=True)
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
    task: Mapped[str] = mapped_column(String(64))  # indexed first in (task, created_at)
    summary: Mapped[dict[str, Any]] = mapped_column(JSON)
    rounds: Mapped[list[RoundRow]] = mapped_column(JSON)
    slices: Mapped[list[SliceRow]] = mapped_column(JSON)
    profile: Mapped[dict[str, Any]] = mapped_column(JSON)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime]
    # a board's results version (count, newest) from the index alone, not the rows
    __table_args__ = (Index("ix_results_task_created_at", "task", "created_at"),)


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
    weights: Mapped[dict[str, Any]] = mapped_column(JSON)
    round_weights: Mapped[dict[str, Any]] = mapped_column(JSON)
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
    leaderboard: Mapped[dict[str, Any]] = mapped_column(JSON)
    weights: Mapped[dict[str, Any]] = mapped_column(JSON)
    round_weights: Mapped[dict[str, Any]] = mapped_column(JSON)
    dataset_hashes: Mapped[dict[str, Any]] = mapped_column(JSON)
    code_version: Mapped[str] = mapped_column(String(128))
    owner_id: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", name="fk_snapshots_owner_id_users")
    )
    created_at: Mapped[datetime]


class WebhookRow(Base):
    """A user's webhook: every submission of theirs, or one (``model_id``), on some events."""

    __tablename__ = "webhooks"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    owner_id: Mapped[str] = mapped_column(
        ForeignKey("users.id", name="fk_webhooks_owner_id_users"), index=True
    )
    model_id: Mapped[str | None] = mapped_column(
        ForeignKey("models.id", name="fk_webhooks_model_id_models"), index=True
    )
    url: Mapped[str] = mapped_column(String(2048))
    events: Mapped[str] = mapped_column(String(64))  # space-separated
    # Sealed, not hashed: the webhook sender must sign with it (see store.sealing).
    secret: Mapped[str] = mapped_column(String(512))
    created_at: Mapped[datetime]


class WebhookDeliveryRow(Base):
    """One notification to send (the outbox), written with the job's final state."""

    __tablename__ = "webhook_deliveries"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)  # the receiver's idempotency key
    webhook_id: Mapped[str] = mapped_column(
        ForeignKey("webhooks.id", name="fk_webhook_deliveries_webhook_id_webhooks"), index=True
    )
    event: Mapped[str] = mapped_column(String(16))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))  # pending, delivered or failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer)
    next_attempt_at: Mapped[datetime | None]
    claim_token: Mapped[str | None] = mapped_column(String(36))
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(String(300))
    history: Mapped[list[Any]] = mapped_column(JSON)  # every attempt: at, status code, error
    created_at: Mapped[datetime]
    last_attempt_at: Mapped[datetime | None]
    __table_args__ = (Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),)


class TaskVersionRow(Base):
    """One version of a task's spec (the merged mapping the loader validates): the files
    seed it, each round or dataset change through the API writes the next one."""

    __tablename__ = "task_versions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    # sha256 of the task file (merged over the defaults) this version started from
    seed_hash: Mapped[str] = mapped_column(String(64))
    reason: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime]
    # Two writers of one version: the second insert fails, never overwrites.
    __table_args__ = (UniqueConstraint("task", "version", name="uq_task_versions_task_version"),)


class TaskDatasetRow(Base):
    """A held-out set added through the API: content-addressed in the blob store."""

    __tablename__ = "task_datasets"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task: Mapped[str] = mapped_column(String(64), index=True)
    round: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(128))
    version: Mapped[int] = mapped_column(Integer)  # of this dataset name in this round
    sha256: Mapped[str] = mapped_column(String(64))
    blob_key: Mapped[str] = mapped_column(String(512))
    examples: Mapped[int] = mapped_column(Integer)
    task_version: Mapped[int] = mapped_column(Integer)  # the task version it came with
    created_at: Mapped[datetime]
    __table_args__ = (
        UniqueConstraint("task", "round", "name", "version", name="uq_task_datasets_version"),
    )


class RateLimitBucketRow(Base):
    """One token bucket every API process draws from (``store/ratelimits.py``)."""

    __tablename__ = "rate_limit_buckets"
    key: Mapped[str] = mapped_column(String(200), primary_key=True)  # kind:user:… or kind:addr:…
    tokens: Mapped[float] = mapped_column(Float)
    # Seconds since the epoch on the service's clock: plain arithmetic in SQL on every backend.
    updated_s: Mapped[float] = mapped_column(Float, index=True)
    granted: Mapped[bool] = mapped_column(Boolean)  # whether the last take got a token


class CollectionRoundRow(Base):
    """A round open for collection: people write examples against its in-the-loop models."""

    __tablename__ = "collection_rounds"
    task: Mapped[str] = mapped_column(String(64), primary_key=True)
    round: Mapped[str] = mapped_column(String(64), primary_key=True)
    status: Mapped[str] = mapped_column(String(16))  # open, closed or frozen
    model_ids: Mapped[list[Any]] = mapped_column(JSON)  # the in-the-loop models, in order
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)  # votes needed, QA F1 threshold, limits
    unhealthy: Mapped[dict[str, Any]] = mapped_column(JSON)  # model id -> why it stopped answering
    opened_by: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", name="fk_collection_rounds_opened_by_users")
    )
    opened_at: Mapped[datetime]
    frozen_at: Mapped[datetime | None]
    frozen_sha256: Mapped[str | None] = mapped_column(String(64))  # the dataset it became


class CollectedExampleRow(Base):
    """An example written (or machine-proposed) for a collection round, with the live
    model's answer; the intended label is never sent to the model."""

    __tablename__ = "collected_examples"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    task: Mapped[str] = mapped_column(String(64))
    round: Mapped[str] = mapped_column(String(64))
    origin: Mapped[str] = mapped_column(String(16))  # human or machine
    author_id: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", name="fk_collected_examples_author_id_users"), index=True
    )
    inputs: Mapped[dict[str, Any]] = mapped_column(JSON)
    intended: Mapped[dict[str, Any]] = mapped_column(
        JSON
    )  # {"label": ...} or {"answer": ..., "answer_start": ...}
    explanation: Mapped[str | None] = mapped_column(Text)
    slices: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # slice column -> value, as written
    model_id: Mapped[str | None] = mapped_column(String(36))  # the model that answered
    model_answer: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    fooled: Mapped[bool | None] = mapped_column(Boolean)  # None: unanswered
    answer_error: Mapped[str | None] = mapped_column(String(300))
    fooled_models: Mapped[list[Any] | None] = mapped_column(
        JSON
    )  # machine proposals: whom it fools
    source_uid: Mapped[str | None] = mapped_column(String(128))  # what a proposal perturbed
    verdict: Mapped[str | None] = mapped_column(String(16))  # correct, incorrect or flagged
    settled_by: Mapped[str | None] = mapped_column(String(36))  # a user id, or "votes"
    settled_at: Mapped[datetime | None]
    created_at: Mapped[datetime]
    __table_args__ = (Index("ix_collected_examples_round", "task", "round"),)


class ValidationVoteRow(Base):
    """One validator's judgement of one example; every vote is kept."""

    __tablename__ = "validation_votes"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    example_id: Mapped[str] = mapped_column(
        ForeignKey("collected_examples.id", name="fk_validation_votes_example_id"), index=True
    )
    voter_id: Mapped[str] = mapped_column(
        ForeignKey("users.id", name="fk_validation_votes_voter_id_users")
    )
    verdict: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime]
    __table_args__ = (UniqueConstraint("example_id", "voter_id", name="uq_validation_votes_voter"),)


class WorkerPresenceRow(Base):
    """A worker's latest sign of life, busy or idle (``/metrics`` shows every worker)."""

    __tablename__ = "worker_presence"
    worker_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    seen_at: Mapped[datetime]
    job_id: Mapped[str | None] = mapped_column(String(36))  # the job it holds, if any
    # What it offers (Capabilities.to_dict); None: an embedded worker that offers nothing
    # beyond running jobs without requirements
    capabilities: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class UploadRow(Base):
    """A resumable upload: an image sent in parts (held by the blob store under ``handle``
    until finished at ``blob_key``); ``model_id`` once it was submitted."""

    __tablename__ = "uploads"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    task: Mapped[str] = mapped_column(String(64))
    owner_id: Mapped[str | None] = mapped_column(String(36), index=True)
    filename: Mapped[str] = mapped_column(String(255))
    size: Mapped[int] = mapped_column(BigInteger)
    part_bytes: Mapped[int]
    blob_key: Mapped[str] = mapped_column(String(512))
    handle: Mapped[str] = mapped_column(String(1024))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime] = mapped_column(index=True)
    state: Mapped[str] = mapped_column(String(16))  # store.uploads.UploadState
    model_id: Mapped[str | None] = mapped_column(String(36))
