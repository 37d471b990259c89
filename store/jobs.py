"""All queue operations in one place: submit, claim with a lease, heartbeat, finish, fail,
requeue stalled jobs. Claims are a conditional UPDATE (portable: SQLite and PostgreSQL);
on PostgreSQL the candidate is picked with ``FOR UPDATE SKIP LOCKED``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from configs.vocabulary.jobs import JobStatus, check_transition, retry_delay, should_retry
from configs.vocabulary.results import EvaluationResult, Failure
from store.db import Database
from store.models import AttemptRow, JobRow, ModelRow, ResultRow, ScoreRow, TaskRow


def utcnow() -> datetime:
    """Naive UTC (SQLite keeps no zone); every timestamp in the store is UTC."""
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class ClaimedJob:
    """What a worker needs to run a job it holds the lease for."""

    id: str
    model_id: str
    task: str
    runtime: dict[str, Any]
    attempt: int
    max_attempts: int


class JobStore:
    """Queue and results over a Database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- tasks and submissions ---------------------------------------------------------------
    def register_task(self, name: str, version: int, spec: dict[str, Any]) -> None:
        with self.db.session() as session, session.begin():
            row = session.get(TaskRow, name)
            if row is None:
                session.add(TaskRow(name=name, version=version, spec=spec, created_at=utcnow()))
            else:
                row.version, row.spec = version, spec

    def submit(
        self,
        task: str,
        name: str,
        runtime: dict[str, Any],
        *,
        image_id: str | None = None,
        max_attempts: int = 3,
    ) -> tuple[str, str]:
        """Create the model row and its job in one transaction; returns (model id, job id)."""
        now = utcnow()
        model_id, job_id = str(uuid.uuid4()), str(uuid.uuid4())
        with self.db.session() as session, session.begin():
            session.add(
                ModelRow(
                    id=model_id,
                    task=task,
                    name=name,
                    runtime=runtime,
                    image_id=image_id,
                    created_at=now,
                )
            )
            session.flush()
            session.add(
                JobRow(
                    id=job_id,
                    model_id=model_id,
                    task=task,
                    status=JobStatus.QUEUED,
                    attempts=0,
                    max_attempts=max_attempts,
                    available_at=now,
                    progress=0.0,
                    stage="queued",
                    created_at=now,
                )
            )
        return model_id, job_id

    def enqueue(self, model_id: str, *, max_attempts: int = 3, stage: str = "queued") -> str:
        """A new evaluation job for an existing model (e.g. its task gained a round)."""
        now = utcnow()
        job_id = str(uuid.uuid4())
        with self.db.session() as session, session.begin():
            model = session.get(ModelRow, model_id)
            if model is None:
                raise KeyError(f"no model {model_id!r}")
            session.add(
                JobRow(
                    id=job_id,
                    model_id=model_id,
                    task=model.task,
                    status=JobStatus.QUEUED,
                    attempts=0,
                    max_attempts=max_attempts,
                    available_at=now,
                    progress=0.0,
                    stage=stage,
                    created_at=now,
                )
            )
        return job_id

    def count_models(self) -> int:
        with self.db.session() as session:
            return len(session.scalars(select(ModelRow.id)).all())

    # -- the lease ---------------------------------------------------------------------------
    def claim(self, worker: str, lease_s: float) -> ClaimedJob | None:
        """Take the oldest available queued job, or None. Safe against concurrent workers."""
        for _ in range(5):  # another worker may win the race for a candidate; try the next
            with self.db.session() as session, session.begin():
                job_id = self._candidate(session)
                if job_id is None:
                    return None
                now = utcnow()
                claimed = session.execute(
                    update(JobRow)
                    .where(JobRow.id == job_id, JobRow.status == JobStatus.QUEUED)
                    .values(
                        status=JobStatus.RUNNING,
                        lease_owner=worker,
                        lease_expires_at=now + timedelta(seconds=lease_s),
                        heartbeat_at=now,
                        attempts=JobRow.attempts + 1,
                        started_at=now,
                        stage="claimed",
                        progress=0.0,
                    )
                ).rowcount
                if claimed != 1:
                    continue
                job = session.get(JobRow, job_id)
                model = session.get(ModelRow, job.model_id)
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

    def _candidate(self, session: Session) -> str | None:
        query = (
            select(JobRow.id)
            .where(JobRow.status == JobStatus.QUEUED, JobRow.available_at <= utcnow())
            .order_by(JobRow.available_at, JobRow.created_at)
            .limit(1)
        )
        if session.bind.dialect.name == "postgresql":  # type: ignore[union-attr]
            query = query.with_for_update(skip_locked=True)
        return session.scalars(query).first()

    def heartbeat(
        self, job_id: str, worker: str, lease_s: float, progress: float, stage: str
    ) -> bool:
        """Extend the lease and record progress; False when the lease was lost."""
        now = utcnow()
        with self.db.session() as session, session.begin():
            return (
                session.execute(
                    update(JobRow)
                    .where(
                        JobRow.id == job_id,
                        JobRow.lease_owner == worker,
                        JobRow.status == JobStatus.RUNNING,
                    )
                    .values(
                        heartbeat_at=now,
                        lease_expires_at=now + timedelta(seconds=lease_s),
                        progress=progress,
                        stage=stage[:200],
                    )
                ).rowcount
                == 1
            )

    # -- outcomes ----------------------------------------------------------------------------
    def finish(self, job_id: str, worker: str, result: EvaluationResult) -> bool:
        """Store every score and the summary and mark the job done, in one transaction."""
        now = utcnow()
        with self.db.session() as session, session.begin():
            job = self._held(session, job_id, worker)
            if job is None:
                return False
            check_transition(job.status, JobStatus.DONE)
            session.add_all(_score_rows(job, result))
            image_id = (result.provenance.get("runtime") or {}).get("image_id")
            if image_id:  # pin the model to the exact image its scores came from
                session.get(ModelRow, job.model_id).image_id = image_id
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
            job.failure_code = job.failure_message = job.log_tail = None
            job.lease_owner = job.lease_expires_at = None
            self._close_attempt(session, job, "done", None)
        return True

    def fail(self, job_id: str, worker: str, failure: Failure) -> JobStatus | None:
        """Record the failure; requeue platform faults while attempts remain. Returns the
        job's new status (None when the lease was lost)."""
        with self.db.session() as session, session.begin():
            job = self._held(session, job_id, worker)
            if job is None:
                return None
            self._close_attempt(session, job, "failed", failure)
            return self._settle(job, failure)

    def requeue_stalled(self) -> list[str]:
        """Running jobs whose lease expired (their worker died): requeue or fail them."""
        lost = Failure("worker_lost", "the worker stopped sending heartbeats", "", False)
        now = utcnow()
        expired = (JobRow.status == JobStatus.RUNNING, JobRow.lease_expires_at < now)
        with self.db.session() as session, session.begin():
            candidates = session.scalars(select(JobRow.id).where(*expired)).all()
            requeued = []
            for job_id in candidates:
                # Re-check under the write lock: a late heartbeat may have renewed the lease.
                still = session.execute(
                    update(JobRow)
                    .where(JobRow.id == job_id, *expired)
                    .values(heartbeat_at=JobRow.heartbeat_at)
                ).rowcount
                if still != 1:
                    continue
                job = session.get(JobRow, job_id, populate_existing=True)
                self._close_attempt(session, job, "lost", lost)
                self._settle(job, lost)
                requeued.append(job_id)
        return requeued

    def _settle(self, job: JobRow, failure: Failure) -> JobStatus:
        retry = should_retry(failure.code, job.attempts, job.max_attempts)
        status = JobStatus.QUEUED if retry else JobStatus.FAILED
        check_transition(job.status, status)
        job.status = status
        job.failure_code, job.failure_message, job.log_tail = (
            failure.code,
            failure.message,
            failure.log_tail,
        )
        job.lease_owner = job.lease_expires_at = None
        if retry:
            job.available_at = utcnow() + retry_delay(job.attempts)
            job.stage = f"retrying after {failure.code}"
        else:
            job.finished_at, job.stage = utcnow(), "failed"
        return status

    @staticmethod
    def _held(session: Session, job_id: str, worker: str) -> JobRow | None:
        """The job if ``worker`` still holds it, locked for this transaction.

        A conditional UPDATE checks ownership and takes the write lock in one statement
        (SQLite starts its write transaction there), so a concurrent requeue cannot slip
        in between the check and the outcome being written."""
        held = session.execute(
            update(JobRow)
            .where(
                JobRow.id == job_id,
                JobRow.lease_owner == worker,
                JobRow.status == JobStatus.RUNNING,
            )
            .values(lease_owner=worker)
        ).rowcount
        if held != 1:
            return None
        return session.get(JobRow, job_id, populate_existing=True, with_for_update=True)

    @staticmethod
    def _close_attempt(
        session: Session, job: JobRow, outcome: str, failure: Failure | None
    ) -> None:
        attempt = session.scalars(
            select(AttemptRow).where(
                AttemptRow.job_id == job.id, AttemptRow.attempt == job.attempts
            )
        ).first()
        if attempt is not None:
            attempt.finished_at, attempt.outcome = utcnow(), outcome
            if failure is not None:
                attempt.failure_code, attempt.failure_message = failure.code, failure.message


def _score_rows(job: JobRow, result: EvaluationResult) -> list[ScoreRow]:
    """One row per Score: the ScoreKey's fields are the row's key columns."""
    return [
        ScoreRow(model_id=job.model_id, job_id=job.id, **score.to_dict()) for score in result.scores
    ]
