"""The job lifecycle as data: statuses, allowed transitions, and the retry decision."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

from configs.vocabulary.failures import FailureCode


class JobStatus(StrEnum):
    """Where a job is. ``done`` and ``failed`` are final."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"

    @property
    def final(self) -> bool:
        return self in (JobStatus.DONE, JobStatus.FAILED)


TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.QUEUED: frozenset({JobStatus.RUNNING, JobStatus.FAILED}),
    # running → queued: a platform fault or a lost worker, retried while attempts remain
    JobStatus.RUNNING: frozenset({JobStatus.DONE, JobStatus.FAILED, JobStatus.QUEUED}),
    JobStatus.DONE: frozenset({JobStatus.QUEUED}),  # re-scoring when a round is added
    JobStatus.FAILED: frozenset({JobStatus.QUEUED}),  # an operator's explicit retry
}


class IllegalTransition(ValueError):
    """A status change the lifecycle does not allow."""


def check_transition(current: str, new: str) -> JobStatus:
    """The new status, or IllegalTransition naming both ends."""
    source, target = JobStatus(current), JobStatus(new)
    if target not in TRANSITIONS[source]:
        raise IllegalTransition(f"a job cannot go from {source} to {target}")
    return target


def should_retry(code: str, attempt: int, max_attempts: int) -> bool:
    """Retry only faults that are not the submission's, and only while attempts remain."""
    try:
        user_caused = FailureCode(code).user_caused
    except ValueError:
        user_caused = False  # an unknown code is our bug, not the researcher's
    return not user_caused and attempt < max_attempts


def retry_delay(attempt: int) -> timedelta:
    """Exponential back-off: 5 s, 10 s, 20 s, … capped at 5 minutes."""
    return timedelta(seconds=min(300, 5 * 2 ** max(0, attempt - 1)))
