"""The queue operations: submit, claim with a lease, heartbeat, finish, fail, cancel (the
recovery of jobs whose holder is gone, hand-backs and retries are in store.leases). Claims are a conditional UPDATE (portable: SQLite and PostgreSQL);
on PostgreSQL the candidate is picked with ``FOR UPDATE SKIP LOCKED``.

Every timestamp comes from the injected clock (naive UTC: SQLite keeps no zone), so tests
move time instead of sleeping. The store decides no retries: a failure's settlement is the
job lifecycle's (configs.vocabulary.jobs), and the store applies it under its lease check.

Every claim gets its own random lease token: heartbeats and outcomes check the token, so two
live workers that share a worker id never both own one job."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from configs.vocabulary.capabilities import Capabilities, Requirements
from configs.vocabulary.clock import SYSTEM_CLOCK, Clock
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import (
    AdversaryCheckpoint,
    AttemptOutcome,
    JobKind,
    JobSpec,
    JobStatus,
    Settlement,
    check_transition,
    job_checkpoint,
    job_spec,
)
from configs.vocabulary.results import EvaluationResult, Failure
from configs.vocabulary.runtimes import StoredRuntime
from store.claims import (
    Claimable,
    Claimed,
    claimable,
    claimable_behind_head,
    looking,
    meets,
    take,
    take_at_once,
)
from store.db import Database, retry_stale
from store.idempotency import DuplicateSubmission, find_by_key
from store.late import LateResults
from store.leases import (
    DEFAULT_ATTEMPTS,
    LeaseRecovery,
    NotRetryable,
    attempt_outcome,
    close_attempt,
    existing,
    held,
    held_by,
    lease_columns,
    new_token,
    settle,
    updated,
)
from store.models import JobRow, ModelRow, TaskRow
from store.results import record_done
from store.webhooks import forget_model

HELD_STAGE = "queued: waiting for its image to build"
HOLD = timedelta(days=3650)  # a held job is available "never", until start_held


class AlreadyQueued(ValueError):
    """A rerun was asked for a submission whose job is queued or running."""


@dataclass(frozen=True)
class ClaimedJob:
    """What a worker needs to run a job it holds the lease for."""

    id: str
    model_id: str | None  # None for a round's job (an adversary run)
    task: str
    runtime: StoredRuntime
    attempt: int
    max_attempts: int
    lease: str  # this claim's token: heartbeats and outcomes present it
    kind: JobKind = JobKind.EVALUATE
    spec: JobSpec = None  # the kind's settings (a backfill's scope, an adversary run's)
    checkpoint: AdversaryCheckpoint | None = None  # where an earlier attempt got to
    platform_faults: int = 0  # the platform faults its earlier attempts suffered
    requirements: Requirements = Requirements()  # what its model needs of the worker


@dataclass(frozen=True)
class CancelOutcome:
    """What a cancel found: the newest job (None when the model has none), its status
    before the cancel, and whether this cancel ended it (False: it was already final)."""

    job_id: str | None
    status: JobStatus | None
    cancelled: bool = True


class JobStore(LeaseRecovery, LateResults):
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
        runtime: StoredRuntime,
        *,
        image_id: str | None = None,
        owner_id: str | None = None,
        max_attempts: int = DEFAULT_ATTEMPTS,
        held: bool = False,
        idempotency_key: str | None = None,
        published: bool = False,
        requirements: Requirements | None = None,
    ) -> tuple[str, str]:
        """Create the model row (owned by ``owner_id``, its results ``published`` or not,
        run only by workers that meet its ``requirements``) and its job in one transaction;
        returns (model id, job id). A ``held`` job is shown as queued but no worker takes it
        until :meth:`start_held` (its image is still being built). A key this submitter
        used already raises DuplicateSubmission naming the first submission."""
        now = self.clock.now()
        model_id = str(uuid.uuid4())
        row = ModelRow(
            id=model_id,
            task=task,
            name=name,
            runtime=runtime,
            image_id=image_id,
            owner_id=owner_id,
            created_at=now,
            idempotency_key=idempotency_key,
            published=published,
            requirements=(requirements.to_dict() or None) if requirements else None,
            required_gpus=requirements.gpus if requirements else 0,
        )
        try:
            job = self._insert(row, max_attempts, held, now)
        except IntegrityError:
            first = find_by_key(self.db, owner_id, idempotency_key) if idempotency_key else None
            if first is None:
                raise
            raise DuplicateSubmission(first) from None
        return model_id, job.id

    def _insert(self, row: ModelRow, max_attempts: int, held: bool, now: datetime) -> JobRow:
        with self.db.session() as session, session.begin():
            session.add(row)
            session.flush()  # the job's foreign key needs the model row first
            job = _new_job(row.id, row.task, max_attempts, HELD_STAGE if held else "queued", now)
            if held:
                job.available_at = now + HOLD
            session.add(job)
        return job

    def start_held(self, model_id: str, runtime: StoredRuntime | None = None) -> bool:
        """Let a held job run now, with ``runtime`` as its model's runtime when given. False
        when the model has no held job (it was cancelled meanwhile, say)."""
        with self.db.session() as session, session.begin():
            job = _held_job(session, model_id)
            if job is None:
                return False
            if runtime is not None:
                existing(session.get(ModelRow, model_id)).runtime = runtime
            job.available_at, job.stage = self.clock.now(), "queued"
        return True

    def held_models(self) -> dict[str, tuple[str, str]]:
        """Every model whose job is still held (a start stopped before building its image):
        model id -> (task, name)."""
        with self.db.session() as session:
            rows = session.execute(
                select(ModelRow.id, ModelRow.task, ModelRow.name)
                .join(JobRow, JobRow.model_id == ModelRow.id)
                .where(*_HELD)
            ).all()
        return {model_id: (task, name) for model_id, task, name in rows}

    def discard_held(self, model_id: str) -> bool:
        """Remove a held job and its model, which never ran (its image did not build):
        nothing of it stays behind. False when the model has no held job."""
        with self.db.session() as session, session.begin():
            job = _held_job(session, model_id)
            if job is None:
                return False
            session.delete(job)
            forget_model(session, model_id)
            session.flush()  # the job and webhooks reference the model
            session.delete(existing(session.get(ModelRow, model_id)))
        return True

    def enqueue(
        self,
        model_id: str,
        *,
        max_attempts: int = DEFAULT_ATTEMPTS,
        stage: str = "queued",
        priority: int = 0,
        spec: dict[str, Any] | None = None,
    ) -> str:
        """A new evaluation job for an existing model (e.g. its task gained a round); jobs
        of a higher ``priority`` are claimed first. ``spec`` holds a backfill's scope."""
        with self.db.session() as session, session.begin():
            model = session.get(ModelRow, model_id)
            if model is None:
                raise KeyError(f"no model {model_id!r}")
            job = _new_job(model_id, model.task, max_attempts, stage, self.clock.now())
            job.priority, job.spec = priority, spec
            session.add(job)
        return job.id

    def rerun(self, model_id: str) -> str:
        """Evaluate ``model_id`` again from a final state; returns the job id. Its newest job,
        if failed, is retried in place (a fresh budget, its attempts kept); a finished one
        gets a new job. Raises KeyError for an unknown model and AlreadyQueued while its
        newest job is queued or running (also when a concurrent rerun just won)."""
        with self.db.session() as session:
            if session.get(ModelRow, model_id) is None:
                raise KeyError(f"no submission {model_id!r}")
            newest = session.scalars(
                select(JobRow).where(JobRow.model_id == model_id).order_by(JobRow.created_at.desc())
            ).first()
        if newest is not None and newest.status == JobStatus.FAILED:
            try:
                self.retry(newest.id)
            except NotRetryable:
                raise AlreadyQueued(f"submission {model_id!r} was just rerun") from None
            return newest.id
        if newest is not None and not JobStatus(newest.status).final:
            raise AlreadyQueued(f"submission {model_id!r} already has a job {newest.status}")
        return self.enqueue(model_id, stage="queued: rerun")

    def count_models(self) -> int:
        with self.db.session() as session:
            return len(session.scalars(select(ModelRow.id)).all())

    # -- the lease ---------------------------------------------------------------------------
    def claim(
        self,
        worker: str,
        lease_s: float,
        *,
        domain: str | None = None,
        capabilities: Capabilities | None = None,
    ) -> ClaimedJob | None:
        """Take the next available queued job (store.claims) with a fresh lease token, or
        None. Safe against concurrent workers. ``domain`` is the worker's lock folder id
        (worker.lock): a restart holding the same lock may settle this claim at once
        (settle_predecessor). Only jobs whose model's requirements ``capabilities`` meet
        are taken (a worker that says nothing of itself takes the jobs that need nothing)."""

        def values() -> dict[str, Any]:  # a fresh lease for every try: a retry's own
            now = self.clock.now()
            return {
                "worker": worker,
                "token": new_token(),
                "domain": domain,
                "now": now,
                **lease_columns(now, lease_s),
            }

        for _ in range(5):  # another worker may win the race for a candidate; try the next
            try:
                if self.db.statements is not self.db.engine:
                    return retry_stale(
                        lambda: self._claim_statement_by_statement(values(), capabilities)
                    )
                return self._claim_in_one_transaction(values(), capabilities)
            except _RaceLost:
                continue
        return None

    def _claim_statement_by_statement(
        self, values: dict[str, Any], capabilities: Capabilities | None
    ) -> ClaimedJob | None:
        """PostgreSQL: each statement its own transaction (store.db.make_statement_engine).
        Usually one: find, take and open the attempt at once. When no job was free (empty,
        or every job held by another claim), an unlocked look through the queue and a take
        whose conditional update settles any race. When the best job's model needs
        something of the worker, the claim is made again in one transaction, holding that
        job's lock while its requirements are checked (claimers beside it skip it)."""
        with self.db.statements.connect() as connection:
            now = values["now"]
            found, taken = take_at_once(connection, {**values, **looking(now, capabilities)})
            if found is not None and taken is not None:
                return _claimed(taken, found, values["token"])
            if found is None:
                behind = claimable_behind_head(connection, now, capabilities, head_seen=False)
                return self._take_found(connection, behind, values)
        return self._claim_in_one_transaction(values, capabilities)

    def _claim_in_one_transaction(
        self, values: dict[str, Any], capabilities: Capabilities | None
    ) -> ClaimedJob | None:
        """Find, take and open the attempt in one transaction (on PostgreSQL the job found
        stays locked until the take: its requirements are checked in Python)."""
        now = values["now"]
        with self.db.engine.begin() as connection:
            if connection.dialect.name != "postgresql":
                return self._take_found(
                    connection, claimable(connection, now, capabilities), values
                )
            found, taken = take_at_once(connection, {**values, **looking(now, capabilities)})
            if found is not None and taken is not None:
                return _claimed(taken, found, values["token"])
            if found is None or not meets(found.requirements, capabilities):
                found = claimable_behind_head(
                    connection, now, capabilities, head_seen=found is not None
                )
            return self._take_found(connection, found, values)

    @staticmethod
    def _take_found(
        connection: Connection, found: Claimable | None, values: dict[str, Any]
    ) -> ClaimedJob | None:
        if found is None:
            return None
        claimed = take(connection, {**values, "job": found.id})
        if claimed is None:
            raise _RaceLost  # another claim took it first (a transaction rolls back)
        return _claimed(claimed, found, values["token"])

    def heartbeat(
        self,
        job_id: str,
        worker: str,
        lease_s: float,
        progress: float,
        stage: str,
        *,
        lease: str,
    ) -> bool:
        """Extend the lease and record progress; False when the lease was lost."""
        now = self.clock.now()
        with self.db.session() as session, session.begin():
            renewed = updated(
                session,
                update(JobRow)
                .where(*held_by(job_id, worker, lease))
                .values(**lease_columns(now, lease_s), progress=progress, stage=stage[:200]),
            )
            return renewed == 1

    # -- outcomes ----------------------------------------------------------------------------
    def finish(self, job_id: str, worker: str, result: EvaluationResult, *, lease: str) -> bool:
        """Store every score and the summary and mark the job done, in one transaction.

        True when stored, or when this ``lease`` already stored it (a retry after a commit
        whose acknowledgement was lost writes nothing twice); False when the lease was lost."""
        now = self.clock.now()
        with self.db.session() as session, session.begin():
            job = held(session, job_id, worker, lease)
            if job is None:
                return attempt_outcome(session, job_id, lease) == AttemptOutcome.DONE
            check_transition(job.status, JobStatus.DONE)
            close_attempt(session, job, AttemptOutcome.DONE, None, now)
            record_done(session, job, result, now)
        return True

    def fail(
        self,
        job_id: str,
        worker: str,
        failure: Failure,
        settlement: Settlement,
        *,
        lease: str,
    ) -> JobStatus | None:
        """Record the failure and apply the lifecycle's settlement (requeued or failed), if
        the claim still holds the job. Returns the new status (None when the lease was lost);
        a retry after a lost acknowledgement returns the settled status and writes nothing."""
        with self.db.session() as session, session.begin():
            job = held(session, job_id, worker, lease)
            if job is None:
                if attempt_outcome(session, job_id, lease) == AttemptOutcome.FAILED:
                    return settlement.status
                return None
            now = self.clock.now()
            close_attempt(session, job, AttemptOutcome.FAILED, failure, now)
            return settle(job, failure, settlement, now)

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
            changed = updated(
                session,
                update(JobRow)
                .where(JobRow.id == job.id, JobRow.status == was)
                .values(heartbeat_at=JobRow.heartbeat_at),
            )
            job = existing(session.get(JobRow, job.id, populate_existing=True))
            if changed != 1:
                return CancelOutcome(job.id, JobStatus(job.status), cancelled=False)
            if was == JobStatus.RUNNING:
                close_attempt(session, job, AttemptOutcome.CANCELLED, cancelled, now)
            settle(job, cancelled, Settlement(JobStatus.FAILED, None, "cancelled"), now)
        return CancelOutcome(job.id, was)


class _RaceLost(Exception):
    """A claim found a job that another claim took first."""


def _claimed(claimed: Claimed, found: Claimable, token: str) -> ClaimedJob:
    """Describe the claimed job to its worker."""
    kind = JobKind(claimed.kind or JobKind.EVALUATE)
    return ClaimedJob(
        claimed.id,
        claimed.model_id,
        claimed.task,
        StoredRuntime(**(found.runtime or {})),
        claimed.attempts,
        claimed.max_attempts,
        token,
        kind,
        job_spec(kind, claimed.spec),
        job_checkpoint(kind, claimed.checkpoint),
        claimed.platform_faults,
        Requirements.parse(found.requirements) if found.requirements else Requirements(),
    )


# A held job: queued, never run, waiting for its image (submit(held=True), start_held).
_HELD = (JobRow.status == JobStatus.QUEUED, JobRow.stage == HELD_STAGE, JobRow.attempts == 0)


def _held_job(session: Session, model_id: str) -> JobRow | None:
    """The model's job if it is still held (queued, never run, waiting for its image),
    locked for this transaction."""
    return session.scalars(
        select(JobRow).where(JobRow.model_id == model_id, *_HELD).with_for_update()
    ).first()


def _new_job(
    model_id: str | None, task: str, max_attempts: int, stage: str, now: datetime
) -> JobRow:
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
        priority=0,
        kind=JobKind.EVALUATE,
    )
