"""Which submissions a quota charges: one with a job queued, running or done, or failed
through the submission's own fault. Platform faults, lost workers and cancels are nobody's
spending (the platform retries the first two)."""

from __future__ import annotations

from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import JobStatus

CHARGED_STATUSES = (JobStatus.QUEUED.value, JobStatus.RUNNING.value, JobStatus.DONE.value)
USER_CAUSED_FAILURES = tuple(code.value for code in FailureCode if code.user_caused)


def is_charged(status: str, failure_code: str | None) -> bool:
    """Whether a job in ``status`` (with ``failure_code`` when failed) costs its submitter
    one submission of their quota."""
    if status in CHARGED_STATUSES:
        return True
    return status == JobStatus.FAILED.value and failure_code in USER_CAUSED_FAILURES
