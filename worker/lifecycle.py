"""The worker's half of the job lifecycle: the worker that held a job decides what its failed
attempt means (it knows the attempt from its claim), and the store applies that decision
atomically with its lease check. Jobs whose worker died are settled by ``requeue_stalled``
(or, after a restart under the same lock, ``settle_predecessor``) with the same policy."""

from __future__ import annotations

from configs.vocabulary.clock import Clock
from configs.vocabulary.jobs import DEFAULT_RETRY_POLICY, JobStatus, RetryPolicy
from configs.vocabulary.results import Failure
from store.jobs import ClaimedJob, JobStore


def settle_failure(
    store: JobStore,
    job: ClaimedJob,
    worker_id: str,
    failure: Failure,
    *,
    policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    clock: Clock | None = None,
) -> JobStatus | None:
    """Requeue (with back-off) or fail ``job`` as ``policy`` decides at the clock's now
    (the store's clock unless given). Returns the new status, or None when the claim (its
    lease token) no longer holds the job (then nothing is written)."""
    now = (clock or store.clock).now()
    settlement = policy.decide(failure.code, job.attempt, now, platform_faults=job.platform_faults)
    return store.fail(job.id, worker_id, failure, settlement, lease=job.lease)
