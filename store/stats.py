"""Queue statistics for operators (``GET /metrics``): a few aggregate queries, computed at
scrape time from the database, since the API and the workers may be separate processes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select

from configs.vocabulary.jobs import JobStatus
from store.db import Database
from store.models import JobRow

FINAL = tuple(s.value for s in JobStatus if s.final)
RECENT_FINISHED = 1000  # the job durations describe this many newest finished jobs


@dataclass(frozen=True)
class QueueStats:
    """What ``/metrics`` shows; times in seconds as of ``now``."""

    by_status: dict[str, int]
    failures_by_code: dict[str, int]
    queued: int
    oldest_queued_age_s: float  # 0 when nothing waits
    # seconds since the newest heartbeat of the running jobs each lease owner holds
    heartbeat_age_s: dict[str, float] = field(default_factory=dict)
    # (status, seconds from start to finish) of the newest finished jobs
    durations: list[tuple[str, float]] = field(default_factory=list)


def queue_stats(db: Database, now: datetime, recent: int = RECENT_FINISHED) -> QueueStats:
    """Counts by status and failure code, the queue's oldest waiting job, the workers'
    heartbeats and the durations of the ``recent`` newest finished jobs."""
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
        finished = session.execute(
            select(JobRow.status, JobRow.started_at, JobRow.finished_at)
            .where(
                JobRow.status.in_(FINAL),
                JobRow.finished_at.is_not(None),
                JobRow.started_at.is_not(None),
            )
            .order_by(JobRow.finished_at.desc())
            .limit(recent)
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
        heartbeat_age_s={str(owner): _seconds(now, beat) for owner, beat in beats if beat},
        durations=[(str(s), _seconds(end, start)) for s, start, end in finished if start and end],
    )


def _seconds(later: datetime, earlier: datetime) -> float:
    return max(0.0, (later - earlier).total_seconds())
