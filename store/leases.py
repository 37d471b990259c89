"""The lease half of the queue: who holds a running job (a per-claim token), how a held job
is settled, and the recovery of jobs whose holder is gone — expired leases, a restarted
worker's predecessor, a job handed back on shutdown — plus an operator's retry.

``JobStore`` (store.jobs) mixes ``LeaseRecovery`` in; the helpers below are shared by both
modules. Every compare-and-set checks that exactly one row changed."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from sqlalchemy import ColumnElement, CursorResult, Update, func, select, update
from sqlalchemy.orm import Session, object_session

from configs.vocabulary.clock import Clock
from configs.vocabulary.failures import FailureCode, is_platform_fault
from configs.vocabulary.jobs import (
    AttemptOutcome,
    JobStatus,
    RetryPolicy,
    Settlement,
    check_transition,
)
from configs.vocabulary.results import Failure
from store.db import Database
from store.models import AttemptRow, Base, JobRow
from store.webhooks import notify_final

RowT = TypeVar("RowT", bound=Base)

DEFAULT_ATTEMPTS = 3


class NotRetryable(ValueError):
    """An operator asked to retry a job that has not failed."""


class LeaseRecovery:
    """Lease checks and recovery; mixed into JobStore, which provides ``db`` and ``clock``."""

    db: Database
    clock: Clock

    def lease_alive(self, token: str) -> bool:
        """Whether a running job holds ``token`` and its lease has not expired (a runtime
        labelled with a dead lease may be reaped by any worker)."""
        alive = (
            JobRow.lease_token == token,
            JobRow.status == JobStatus.RUNNING,
            JobRow.lease_expires_at >= self.clock.now(),
        )
        with self.db.session() as session:
            return session.scalar(select(func.count(JobRow.id)).where(*alive)) == 1

    def lease_dead(self, token: str) -> bool:
        """Whether ``token`` is a lease this database granted that no longer holds its job:
        a sandbox labelled with it is an orphan any worker may remove. A token it never
        granted (another deployment sharing the Docker engine) is not its to judge: False."""
        with self.db.session() as session:
            granted = session.scalar(
                select(func.count(AttemptRow.id)).where(AttemptRow.lease_token == token)
            )
        return bool(granted) and not self.lease_alive(token)

    def release(self, job_id: str, lease: str) -> bool:
        """Hand a running job back to the queue at once (its worker is shutting down), without
        charging an attempt: the budget grows by one. False when ``lease`` no longer holds it."""
        now = self.clock.now()
        with self.db.session() as session, session.begin():
            job = held(session, job_id, None, lease)
            if job is None:
                return False
            close_attempt(session, job, AttemptOutcome.HANDED_BACK, None, now)
            job.status = check_transition(job.status, JobStatus.QUEUED)
            job.stage, job.available_at, job.progress = "handed back", now, 0.0
            job.max_attempts += 1  # the attempt was cut short by us, not spent by the job
            release_lease(job, None)
        return True

    def retry(self, job_id: str, *, attempts: int = DEFAULT_ATTEMPTS) -> None:
        """An operator's retry: a failed job is queued again now with a fresh budget of
        ``attempts`` runs; its earlier attempts stay in job_attempts (attempt numbers go on).

        Raises KeyError for an unknown job and NotRetryable for a job that is not failed."""
        if attempts < 1:
            raise ValueError("a retry needs at least one attempt")
        now = self.clock.now()
        with self.db.session() as session, session.begin():
            job = session.get(JobRow, job_id)
            if job is None:
                raise KeyError(f"no job {job_id!r}")
            # Compare-and-set: a concurrent retry or cancel between the read and here loses.
            changed = updated(
                session,
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.status == JobStatus.FAILED)
                .values(status=JobStatus.QUEUED),
            )
            if changed != 1:
                status = existing(session.get(JobRow, job_id, populate_existing=True)).status
                raise NotRetryable(f"job {job_id} is {status}; only failed jobs can be retried")
            job = existing(session.get(JobRow, job_id, populate_existing=True))
            job.max_attempts, job.platform_faults = job.attempts + attempts, 0
            job.available_at, job.finished_at, job.progress = now, None, 0.0
            job.stage = "queued (retry)"
            release_lease(job, None)

    def requeue_stalled(self, policy: RetryPolicy, *, limit: int | None = None) -> list[str]:
        """Running jobs whose lease expired (their worker died): requeued or failed as
        ``policy`` decides for a lost worker, at most ``limit`` per call. Returns their ids."""
        now = self.clock.now()
        expired = (JobRow.status == JobStatus.RUNNING, JobRow.lease_expires_at < now)
        message = "the worker stopped sending heartbeats"
        return self._settle_lost(expired, policy, message, limit)

    def settle_predecessor(self, worker: str, domain: str, policy: RetryPolicy) -> list[str]:
        """Running jobs leased by ``worker`` in lock ``domain``, settled as lost at once.

        Only the holder of that id's lock in that domain may call this: the lock proves the
        process that claimed them is dead, so waiting out their leases would only delay."""
        mine = (
            JobRow.status == JobStatus.RUNNING,
            JobRow.lease_owner == worker,
            JobRow.lease_domain == domain,
        )
        return self._settle_lost(mine, policy, "the worker died; its restart took the job back")

    def _settle_lost(
        self,
        condition: tuple[ColumnElement[bool], ...],
        policy: RetryPolicy,
        message: str,
        limit: int | None = None,
    ) -> list[str]:
        lost = Failure(FailureCode.WORKER_LOST, message)
        now = self.clock.now()
        with self.db.session() as session, session.begin():
            query = select(JobRow.id).where(*condition).order_by(JobRow.lease_expires_at)
            candidates = session.scalars(query.limit(limit)).all()
            settled = []
            for job_id in candidates:
                # Re-check under the write lock: a late heartbeat may have renewed the lease.
                still = updated(
                    session,
                    update(JobRow)
                    .where(JobRow.id == job_id, *condition)
                    .values(heartbeat_at=JobRow.heartbeat_at),
                )
                if still != 1:
                    continue
                job = existing(session.get(JobRow, job_id, populate_existing=True))
                close_attempt(session, job, AttemptOutcome.LOST, lost, now)
                # the dead worker cannot decide; the same lifecycle decides in its place
                settlement = policy.decide(
                    lost.code,
                    job.attempts,
                    now,
                    platform_faults=job.platform_faults,
                )
                settle(job, lost, settlement, now)
                settled.append(job_id)
        return settled


def new_token() -> str:
    """A claim's lease token: random, so no two claims (or workers) ever share one."""
    return uuid.uuid4().hex


def updated(session: Session, statement: Update) -> int:
    """How many rows an UPDATE changed: every compare-and-set here checks it is one."""
    return cast(CursorResult[Any], session.execute(statement)).rowcount


def existing(row: RowT | None) -> RowT:
    """A row this transaction has just matched or references by foreign key."""
    if row is None:
        raise LookupError("a row vanished inside the transaction that matched it")
    return row


def held_by(job_id: str, worker: str | None, lease: str) -> tuple[ColumnElement[bool], ...]:
    """The condition that the claim ``lease`` holds the running job ``job_id`` (and, when
    ``worker`` is given, that it was granted to that worker). A worker id alone is never
    enough: two live workers can share one (two hosts with one hostname)."""
    holder = [JobRow.lease_token == lease]
    if worker is not None:
        holder.append(JobRow.lease_owner == worker)
    return (JobRow.id == job_id, *holder, JobRow.status == JobStatus.RUNNING)


def held(session: Session, job_id: str, worker: str | None, lease: str) -> JobRow | None:
    """The job if it is still held (see held_by), locked for this transaction.

    A conditional UPDATE checks ownership and takes the write lock in one statement
    (SQLite starts its write transaction there), so a concurrent requeue cannot slip
    in between the check and the outcome being written."""
    statement = update(JobRow).where(*held_by(job_id, worker, lease))
    if updated(session, statement.values(heartbeat_at=JobRow.heartbeat_at)) != 1:
        return None
    return session.get(JobRow, job_id, populate_existing=True, with_for_update=True)


def attempt_outcome(session: Session, job_id: str, lease: str) -> AttemptOutcome | None:
    """How the attempt that claimed with ``lease`` ended (None while it runs or if unknown):
    lets a retried finish or fail tell "already recorded by me" from "lost"."""
    query = select(AttemptRow.outcome).where(
        AttemptRow.job_id == job_id, AttemptRow.lease_token == lease
    )
    outcome = session.scalars(query).first()
    return None if outcome is None else AttemptOutcome(outcome)


def lease_columns(now: datetime, lease_s: float) -> dict[str, datetime]:
    """The columns a claim and a heartbeat set: the lease runs ``lease_s`` from ``now``."""
    return {"heartbeat_at": now, "lease_expires_at": now + timedelta(seconds=lease_s)}


def release_lease(job: JobRow, failure: Failure | None) -> None:
    """Drop the lease and show ``failure`` (or none) as the job's current failure."""
    job.lease_owner = job.lease_expires_at = job.lease_token = job.lease_domain = None
    if failure is None:
        job.failure_code = job.failure_message = job.log_tail = None
    else:
        job.failure_code, job.failure_message = failure.code, failure.message
        job.log_tail = failure.log_tail


def settle(job: JobRow, failure: Failure, settlement: Settlement, now: datetime) -> JobStatus:
    """Move a failed job as the lifecycle's ``settlement`` says: queued again later, or
    failed for good. Platform faults are counted apart from what the submission caused."""
    status = check_transition(job.status, settlement.status)
    platform = is_platform_fault(failure.code)
    if job.status == JobStatus.RUNNING and platform:
        job.platform_faults += 1
        if not status.final:  # our fault spent none of the submitter's attempts
            job.max_attempts += 1
    job.status, job.stage = status, settlement.stage
    if status.final and platform:
        # still the platform's code, so quotas never charge it; an operator may retry it
        faults = job.platform_faults
        job.stage = f"failed: gave up after {faults} platform fault{'s' * (faults != 1)}"
    release_lease(job, failure)
    if settlement.available_at is not None:
        job.available_at = settlement.available_at
    if status.final:
        job.finished_at = now
        session = object_session(job)
        if session is not None:  # webhooks learn of it in this transaction, or not at all
            notify_final(session, job, now, failure)
    return status


def close_attempt(
    session: Session,
    job: JobRow,
    outcome: AttemptOutcome,
    failure: Failure | None,
    now: datetime,
) -> None:
    """End the running attempt of ``job`` (found by its lease token; rows from before
    tokens by number) with ``outcome``. Call before the lease is released."""
    mine = (
        AttemptRow.lease_token == job.lease_token
        if job.lease_token is not None
        else AttemptRow.attempt == job.attempts
    )
    attempt = session.scalars(select(AttemptRow).where(AttemptRow.job_id == job.id, mine)).first()
    if attempt is not None:
        attempt.finished_at, attempt.outcome = now, outcome
        if failure is not None:
            attempt.failure_code, attempt.failure_message = failure.code, failure.message
