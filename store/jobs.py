"""All queue operations in one place: submit, claim with a lease, heartbeat, finish, fail,
requeue stalled jobs. Claims are a conditional UPDATE (portable: SQLite and PostgreSQL);
on PostgreSQL the candidate is picked with ``FOR UPDATE SKIP LOCKED``.

Every timestamp comes from the injected clock (naive UTC: SQLite keeps no zone), so tests
move time instead of sleeping. The store decides no retries: a failure's settlement is the
job lifecycle's (configs.vocabulary.jobs), and the store applies it under its lease check."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from sqlalchemy import ColumnElement, CursorResult, Update, select, update
from sqlalchemy.orm import Session

from configs.vocabulary.clock import SYSTEM_CLOCK, Clock
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import JobStatus, RetryPolicy, Settlement, check_transition
from configs.vocabulary.results import EvaluationResult, Failure
from store.db import Database
from store.models import AttemptRow, Base, JobRow, ModelRow, ResultRow, ScoreRow, TaskRow

RowT = TypeVar("RowT", bound=Base)


@dataclass(frozen=True)
class ClaimedJob:
    """What a worker needs to run a job it holds the lease for."""

    id: str
    model_id: str
    task: str
    runtime: dict[str, Any]
    attempt: int
    max_attempts: int


@dataclass(frozen=True)
class CancelOutcome:
    """What a cancel found: the newest job (None when the model has none), its status
    before the cancel, and whether this cancel ended it (False: it was already final)."""

    job_id: str | None
    status: JobStatus | None
    cancelled: bool = True


class JobStore:
    """Queue and results over a Database."""

    def __init__(self, db: Database, clock: Clock = SYSTEM_CLOCK) -> None:
        self.db = db
        self.clock = clock

    # -- tasks and submissions ---------------------------------------------------------------
    def register_task(self, name: str, version: int, spec: dict[str, Any]) -> None:
        with self.db.session() as session, session.begin():
            row = session.get(TaskRow, name)
            if row is None:
                session.add(
                    TaskRow(name=name, version=version, spec=spec, created_at=self.clock.now())
                )
            else:
                row.version, row.spec = version, spec

    def submit(
        self,
        task: str,
        name: str,
        runtime: dict[str, Any],
        *,
        image_id: str | None = None,
        owner_id: str | None = None,
        max_attempts: int = 3,
    ) -> tuple[str, str]:
        """Create the model row (owned by ``owner_id``) and its job in one transaction;
        returns (model id, job id)."""
        now = self.clock.now()
        model_id = str(uuid.uuid4())
        with self.db.session() as session, session.begin():
            session.add(
                ModelRow(
                    id=model_id,
                    task=task,
                    name=name,
                    runtime=runtime,
                    image_id=image_id,
                    owner_id=owner_id,
                    created_at=now,
                )
            )
            session.flush()  # the job's foreign key needs the model row first
            job = _new_job(model_id, task, max_attempts, "queued", now)
            session.add(job)
        return model_id, job.id

    def enqueue(self, model_id: str, *, max_attempts: int = 3, stage: str = "queued") -> str:
        """A new evaluation job for an existing model (e.g. its task gained a round)."""
        with self.db.session() as session, session.begin():
            model = session.get(ModelRow, model_id)
            if model is None:
                raise KeyError(f"no model {model_id!r}")
            job = _new_job(model_id, model.task, max_attempts, stage, self.clock.now())
            session.add(job)
        return job.id

    def count_models(self) -> int:
        with self.db.session() as session:
            return len(session.scalars(select(ModelRow.id)).all())

    # -- the lease ---------------------------------------------------------------------------
    def claim(self, worker: str, lease_s: float) -> ClaimedJob | None:
        """Take the oldest available queued job, or None. Safe against concurrent workers."""
        for _ in range(5):  # another worker may win the race for a candidate; try the next
            with self.db.session() as session, session.begin():
                now = self.clock.now()
                job_id = _candidate(session, now)
                if job_id is None:
                    return None
                claimed = _updated(
                    session,
                    update(JobRow)
                    .where(JobRow.id == job_id, JobRow.status == JobStatus.QUEUED)
                    .values(
                        status=JobStatus.RUNNING,
                        lease_owner=worker,
                        **_lease(now, lease_s),
                        attempts=JobRow.attempts + 1,
                        started_at=now,
                        stage="claimed",
                        progress=0.0,
                    ),
                )
                if claimed != 1:
                    continue
                job = _existing(session.get(JobRow, job_id))
                model = _existing(session.get(ModelRow, job.model_id))
                session.add(
                    AttemptRow(job_id=job_id, attempt=job.attempts, worker=worker, started_at=now)
                )
                return ClaimedJob(
                    job.id,
                    job.model_id,
                    job.task,
                    dict(model.runtime),
                    job.attempts,
                    job.max_attempts,
                )
        return None

    def heartbeat(
        self, job_id: str, worker: str, lease_s: float, progress: float, stage: str
    ) -> bool:
        """Extend the lease and record progress; False when the lease was lost."""
        now = self.clock.now()
        with self.db.session() as session, session.begin():
            renewed = _updated(
                session,
                update(JobRow)
                .where(*_held_by(job_id, worker))
                .values(**_lease(now, lease_s), progress=progress, stage=stage[:200]),
            )
            return renewed == 1

    # -- outcomes ----------------------------------------------------------------------------
    def finish(self, job_id: str, worker: str, result: EvaluationResult) -> bool:
        """Store every score and the summary and mark the job done, in one transaction."""
        now = self.clock.now()
        with self.db.session() as session, session.begin():
            job = _held(session, job_id, worker)
            if job is None:
                return False
            check_transition(job.status, JobStatus.DONE)
            session.add_all(_score_rows(job, result))
            image_id = (result.provenance.get("runtime") or {}).get("image_id")
            if image_id:  # pin the model to the exact image its scores came from
                _existing(session.get(ModelRow, job.model_id)).image_id = image_id
            session.add(
                ResultRow(
                    job_id=job.id,
                    model_id=job.model_id,
                    task=job.task,
                    summary=result.summary,
                    rounds=result.rounds,
                    slices=result.slices,
                    profile=result.profile,
                    provenance=result.provenance,
                    created_at=now,
                )
            )
            job.status, job.progress, job.stage, job.finished_at = JobStatus.DONE, 1.0, "done", now
            # an earlier attempt's failure stays in its attempt row, not on a finished job
            _release(job, None)
            _close_attempt(session, job, "done", None, now)
        return True

    def fail(
        self, job_id: str, worker: str, failure: Failure, settlement: Settlement
    ) -> JobStatus | None:
        """Record the failure and apply the lifecycle's settlement (requeued or failed), if
        ``worker`` still holds the job. Returns the new status (None when the lease was lost)."""
        with self.db.session() as session, session.begin():
            job = _held(session, job_id, worker)
            if job is None:
                return None
            now = self.clock.now()
            _close_attempt(session, job, "failed", failure, now)
            return _settle(job, failure, settlement, now)

    def cancel(self, model_id: str, message: str) -> CancelOutcome:
        """End the newest job of ``model_id`` as cancelled, at once. A queued job never runs;
        a running one loses its lease, so its worker's next heartbeat returns False and the
        worker stops at its next step (the lease-lost path) and records nothing."""
        now = self.clock.now()
        cancelled = Failure(FailureCode.CANCELLED, message)
        with self.db.session() as session, session.begin():
            job = session.scalars(
                select(JobRow).where(JobRow.model_id == model_id).order_by(JobRow.created_at.desc())
            ).first()
            if job is None:
                return CancelOutcome(None, None)
            was = JobStatus(job.status)
            if was.final:
                return CancelOutcome(job.id, was, cancelled=False)
            # Compare-and-set: a worker finishing or a claim between the read and here wins.
            changed = _updated(
                session,
                update(JobRow)
                .where(JobRow.id == job.id, JobRow.status == was)
                .values(heartbeat_at=JobRow.heartbeat_at),
            )
            job = _existing(session.get(JobRow, job.id, populate_existing=True))
            if changed != 1:
                return CancelOutcome(job.id, JobStatus(job.status), cancelled=False)
            if was == JobStatus.RUNNING:
                _close_attempt(session, job, "cancelled", cancelled, now)
            _settle(job, cancelled, Settlement(JobStatus.FAILED, None, "cancelled"), now)
        return CancelOutcome(job.id, was)

    def requeue_stalled(self, policy: RetryPolicy) -> list[str]:
        """Running jobs whose lease expired (their worker died): requeued or failed as
        ``policy`` decides for a lost worker. Returns their ids."""
        lost = Failure(FailureCode.WORKER_LOST, "the worker stopped sending heartbeats")
        now = self.clock.now()
        expired = (JobRow.status == JobStatus.RUNNING, JobRow.lease_expires_at < now)
        with self.db.session() as session, session.begin():
            candidates = session.scalars(select(JobRow.id).where(*expired)).all()
            requeued = []
            for job_id in candidates:
                # Re-check under the write lock: a late heartbeat may have renewed the lease.
                still = _updated(
                    session,
                    update(JobRow)
                    .where(JobRow.id == job_id, *expired)
                    .values(heartbeat_at=JobRow.heartbeat_at),
                )
                if still != 1:
                    continue
                job = _existing(session.get(JobRow, job_id, populate_existing=True))
                _close_attempt(session, job, "lost", lost, now)
                # the dead worker cannot decide; the same lifecycle decides in its place
                settlement = policy.decide(lost.code, job.attempts, job.max_attempts, now)
                _settle(job, lost, settlement, now)
                requeued.append(job_id)
        return requeued


def _updated(session: Session, statement: Update) -> int:
    """How many rows an UPDATE changed: every compare-and-set here checks it is one."""
    return cast(CursorResult[Any], session.execute(statement)).rowcount


def _existing(row: RowT | None) -> RowT:
    """A row this transaction has just matched or references by foreign key."""
    if row is None:
        raise LookupError("a row vanished inside the transaction that matched it")
    return row


def _held(session: Session, job_id: str, worker: str) -> JobRow | None:
    """The job if ``worker`` still holds it, locked for this transaction.

    A conditional UPDATE checks ownership and takes the write lock in one statement
    (SQLite starts its write transaction there), so a concurrent requeue cannot slip
    in between the check and the outcome being written."""
    held = _updated(
        session, update(JobRow).where(*_held_by(job_id, worker)).values(lease_owner=worker)
    )
    if held != 1:
        return None
    return session.get(JobRow, job_id, populate_existing=True, with_for_update=True)


def _new_job(model_id: str, task: str, max_attempts: int, stage: str, now: datetime) -> JobRow:
    """A queued job, available at once, that has not run yet."""
    return JobRow(
        id=str(uuid.uuid4()),
        model_id=model_id,
        task=task,
        status=JobStatus.QUEUED,
        attempts=0,
        max_attempts=max_attempts,
        available_at=now,
        progress=0.0,
        stage=stage,
        created_at=now,
    )


def _candidate(session: Session, now: datetime) -> str | None:
    """The id of the oldest job that may run at ``now``, if any."""
    query = (
        select(JobRow.id)
        .where(JobRow.status == JobStatus.QUEUED, JobRow.available_at <= now)
        .order_by(JobRow.available_at, JobRow.created_at)
        .limit(1)
    )
    if session.bind.dialect.name == "postgresql":  # type: ignore[union-attr]
        query = query.with_for_update(skip_locked=True)
    return session.scalars(query).first()


def _held_by(job_id: str, worker: str) -> tuple[ColumnElement[bool], ...]:
    """The condition that ``worker`` holds the lease of ``job_id``."""
    return (
        JobRow.id == job_id,
        JobRow.lease_owner == worker,
        JobRow.status == JobStatus.RUNNING,
    )


def _lease(now: datetime, lease_s: float) -> dict[str, datetime]:
    """The columns a claim and a heartbeat set: the lease runs ``lease_s`` from ``now``."""
    return {"heartbeat_at": now, "lease_expires_at": now + timedelta(seconds=lease_s)}


def _release(job: JobRow, failure: Failure | None) -> None:
    """Drop the lease and show ``failure`` (or none) as the job's current failure."""
    job.lease_owner = job.lease_expires_at = None
    if failure is None:
        job.failure_code = job.failure_message = job.log_tail = None
    else:
        job.failure_code, job.failure_message = failure.code, failure.message
        job.log_tail = failure.log_tail


def _settle(job: JobRow, failure: Failure, settlement: Settlement, now: datetime) -> JobStatus:
    """Move a failed job as the lifecycle's ``settlement`` says: queued again later, or
    failed for good."""
    status = check_transition(job.status, settlement.status)
    job.status, job.stage = status, settlement.stage
    _release(job, failure)
    if settlement.available_at is not None:
        job.available_at = settlement.available_at
    if status.final:
        job.finished_at = now
    return status


def _close_attempt(
    session: Session, job: JobRow, outcome: str, failure: Failure | None, now: datetime
) -> None:
    attempt = session.scalars(
        select(AttemptRow).where(AttemptRow.job_id == job.id, AttemptRow.attempt == job.attempts)
    ).first()
    if attempt is not None:
        attempt.finished_at, attempt.outcome = now, outcome
        if failure is not None:
            attempt.failure_code, attempt.failure_message = failure.code, failure.message


def _score_rows(job: JobRow, result: EvaluationResult) -> list[ScoreRow]:
    """One row per Score: the ScoreKey's fields are the row's key columns."""
    return [
        ScoreRow(model_id=job.model_id, job_id=job.id, **score.to_dict()) for score in result.scores
    ]
