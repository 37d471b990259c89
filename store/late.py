"""Results that arrive after their lease: a live worker whose store was away for longer than
the lease keeps its finished result and records it once the store answers.

The record is fenced: it is stored only while no newer attempt has started, i.e. the job
was requeued (or failed for good by platform faults) when the lease expired, and nobody has
claimed it since. The late attempt is then recorded as done, as if the outage had not been.
"""

from __future__ import annotations

from sqlalchemy import select, update

from configs.vocabulary.clock import Clock
from configs.vocabulary.failures import is_platform_fault
from configs.vocabulary.jobs import AttemptOutcome, JobStatus
from configs.vocabulary.results import EvaluationResult
from store.db import Database
from store.leases import updated
from store.models import AttemptRow, JobRow
from store.results import record_done


class LateResults:
    """Fenced late finishes; mixed into JobStore, which provides ``db`` and ``clock``."""

    db: Database
    clock: Clock

    def finish_late(self, job_id: str, attempt: int, lease: str, result: EvaluationResult) -> bool:
        """Store ``result`` of the attempt that claimed with ``lease`` although that lease
        expired, if the job is waiting to run again (or failed by platform faults) and no
        newer attempt has started; True when stored."""
        now = self.clock.now()
        with self.db.session() as session, session.begin():
            # one statement checks the fence and takes the write lock (see leases.held)
            fenced = update(JobRow).where(
                JobRow.id == job_id,
                JobRow.attempts == attempt,
                JobRow.status.in_([JobStatus.QUEUED, JobStatus.FAILED]),
            )
            if updated(session, fenced.values(heartbeat_at=JobRow.heartbeat_at)) != 1:
                return False
            job = session.get(JobRow, job_id, populate_existing=True, with_for_update=True)
            mine = session.scalars(
                select(AttemptRow).where(
                    AttemptRow.job_id == job_id, AttemptRow.lease_token == lease
                )
            ).first()
            if job is None or mine is None or mine.outcome != AttemptOutcome.LOST:
                return False  # not lost to its lease: recorded, failed or handed back
            if job.status == JobStatus.FAILED and not is_platform_fault(job.failure_code or ""):
                return False  # ended for another reason (a cancel): that stands
            job.platform_faults = max(0, job.platform_faults - 1)  # the lost attempt was not
            mine.outcome, mine.finished_at = AttemptOutcome.DONE, now
            mine.failure_code = mine.failure_message = None
            record_done(session, job, result, now, "done (recorded after a store outage)")
        return True
