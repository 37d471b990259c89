"""Queue statistics for operators (``GET /metrics``): a few aggregate queries, computed at
scrape time from the database, since the API and the workers may be separate processes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Float, and_, case, cast, func, select
from sqlalchemy.orm import Session

from configs.vocabulary.jobs import JobStatus
from store.db import Database
from store.models import AttemptRow, JobRow
from store.presence import presence_ages

FINAL = tuple(s.value for s in JobStatus if s.final)
# Seconds: from a tiny model's minute to a large one's hour.
DURATION_BUCKETS = (10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0)


@dataclass(frozen=True)
class Durations:
    """A histogram of finished jobs' start-to-finish seconds (one final status): counts at
    or under each of ``DURATION_BUCKETS``, the total count and the sum."""

    buckets: tuple[int, ...]
    count: int
    total_s: float


@dataclass(frozen=True)
class TaskQueue:
    """One task's share of the queue: jobs waiting, jobs running, and how long the oldest
    job ready to run has waited (0 when none waits)."""

    queued: int = 0
    running: int = 0
    oldest_wait_s: float = 0.0

    def to_dict(self) -> dict[str, float | int]:
        return {"queued": self.queued, "running": self.running, "oldest_wait_s": self.oldest_wait_s}


def task_queues(db: Database, now: datetime) -> dict[str, TaskQueue]:
    """Every task with a job queued or running, by name (one grouped query)."""
    busy = (JobStatus.QUEUED, JobStatus.RUNNING)
    ready = and_(JobRow.status == JobStatus.QUEUED, JobRow.available_at <= now)
    query = (
        select(
            JobRow.task,
            func.count().filter(JobRow.status == JobStatus.QUEUED),
            func.count().filter(JobRow.status == JobStatus.RUNNING),
            func.min(case((ready, JobRow.available_at))),
        )
        .where(JobRow.status.in_(busy))
        .group_by(JobRow.task)
    )
    with db.session() as session:
        rows = session.execute(query).all()
    return {str(row[0]): _task_queue(row[1], row[2], row[3], now) for row in rows}


def _task_queue(queued: Any, running: Any, oldest: datetime | None, now: datetime) -> TaskQueue:
    return TaskQueue(int(queued), int(running), _seconds(now, oldest) if oldest else 0.0)


@dataclass(frozen=True)
class QueueStats:
    """What ``/metrics`` shows; times in seconds as of ``now``."""

    by_status: dict[str, int]
    failures_by_code: dict[str, int]
    queued: int
    oldest_queued_age_s: float  # 0 when nothing waits
    # seconds since each worker's latest sign of life: a held job's heartbeat or, idle,
    # its presence row
    heartbeat_age_s: dict[str, float] = field(default_factory=dict)
    # every finished job's start-to-finish seconds, by final status
    durations: dict[str, Durations] = field(default_factory=dict)
    # every ended attempt, by (outcome, failure code or ""): how often workers were lost
    attempts: dict[tuple[str, str], int] = field(default_factory=dict)
    # each task's queue: depth, running jobs and the oldest wait
    by_task: dict[str, TaskQueue] = field(default_factory=dict)


def queue_stats(db: Database, now: datetime) -> QueueStats:
    """Counts by status and failure code, the queue's oldest waiting job, every worker's
    latest sign of life, the durations of every finished job and attempts by outcome."""
    with db.session() as session:
        counts = session.execute(
            select(JobRow.status, JobRow.failure_code, func.count()).group_by(
                JobRow.status, JobRow.failure_code
            )
        ).all()
        # A job waiting out a retry back-off (available later) is queued but not late yet.
        oldest = session.scalar(
            select(func.min(JobRow.available_at)).where(
                JobRow.status == JobStatus.QUEUED, JobRow.available_at <= now
            )
        )
        beats = session.execute(
            select(
                JobRow.lease_owner, func.max(func.coalesce(JobRow.heartbeat_at, JobRow.started_at))
            )
            .where(JobRow.status == JobStatus.RUNNING, JobRow.lease_owner.is_not(None))
            .group_by(JobRow.lease_owner)
        ).all()
        durations = _durations(session)
        attempts = session.execute(
            select(AttemptRow.outcome, AttemptRow.failure_code, func.count())
            .where(AttemptRow.outcome.is_not(None))
            .group_by(AttemptRow.outcome, AttemptRow.failure_code)
        ).all()
    by_status: dict[str, int] = dict.fromkeys((s.value for s in JobStatus), 0)
    failures: dict[str, int] = {}
    for status, code, count in counts:
        by_status[status] = by_status.get(status, 0) + count
        if status == JobStatus.FAILED:
            key = code or "unknown"
            failures[key] = failures.get(key, 0) + count
    return QueueStats(
        by_status=by_status,
        failures_by_code=failures,
        queued=by_status[JobStatus.QUEUED],
        oldest_queued_age_s=_seconds(now, oldest) if oldest else 0.0,
        heartbeat_age_s=_ages(beats, presence_ages(db, now), now),
        durations=durations,
        attempts={(str(o), str(c or "")): int(n) for o, c, n in attempts},
        by_task=task_queues(db, now),
    )


def _ages(beats: Sequence[Any], idle: dict[str, float], now: datetime) -> dict[str, float]:
    """Each worker's freshest sign of life: a held job's heartbeat or its presence row."""
    ages = dict(idle)
    for owner, beat in (tuple(row) for row in beats):
        if owner and beat:
            ages[str(owner)] = min(ages.get(str(owner), float("inf")), _seconds(now, beat))
    return ages


def _duration_s(session: Session) -> ColumnElement[float]:
    """finished_at - started_at in seconds, in the database's own arithmetic."""
    if session.bind is not None and session.bind.dialect.name == "postgresql":
        return cast(func.extract("epoch", JobRow.finished_at - JobRow.started_at), Float)
    # julianday is a float of days: rounded to the millisecond, bucket edges hold exactly
    days = func.julianday(JobRow.finished_at) - func.julianday(JobRow.started_at)
    return func.round(days * 86400.0, 3)


def _durations(session: Session) -> dict[str, Durations]:
    """One aggregate query: per final status, the jobs under each bucket, count and sum."""
    seconds = _duration_s(session)
    under = [func.sum(case((seconds <= bound, 1), else_=0)) for bound in DURATION_BUCKETS]
    rows = session.execute(
        select(JobRow.status, func.count(), func.sum(seconds), *under)
        .where(
            JobRow.status.in_(FINAL),
            JobRow.finished_at.is_not(None),
            JobRow.started_at.is_not(None),
        )
        .group_by(JobRow.status)
    ).all()
    found: dict[str, Durations] = {}
    for row in rows:
        values: list[Any] = list(row)
        status, count, total, counts = values[0], values[1], values[2], values[3:]
        found[str(status)] = Durations(
            tuple(int(n or 0) for n in counts), int(count), max(0.0, float(total or 0.0))
        )
    return found


def _seconds(later: datetime, earlier: datetime) -> float:
    return max(0.0, (later - earlier).total_seconds())
