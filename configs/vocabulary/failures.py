"""Failure codes: every way an evaluation can end badly has a code, a blame and a sentence."""

from __future__ import annotations

from enum import StrEnum


class FailureCode(StrEnum):
    """Machine-readable reasons an evaluation failed (see MODEL_PROTOCOL.md)."""

    IMAGE_TOO_LARGE = "image_too_large"
    IMAGE_NOT_LOADABLE = "image_not_loadable"
    START_FAILED = "start_failed"
    NEVER_HEALTHY = "never_healthy"
    BAD_STATUS = "bad_status"
    BAD_JSON = "bad_json"
    WRONG_COUNT = "wrong_count"
    WRONG_ORDER = "wrong_order"
    LABEL_OUTSIDE_SET = "label_outside_set"
    BAD_PREDICTION = "bad_prediction"
    REPLY_TOO_LARGE = "reply_too_large"
    REQUEST_TIMEOUT = "request_timeout"
    TOTAL_TIMEOUT = "total_timeout"
    CRASHED = "crashed"
    OOM_KILLED = "oom_killed"
    PIDS_EXHAUSTED = "pids_exhausted"
    DISK_FULL = "disk_full"
    WORKER_LOST = "worker_lost"
    PLATFORM_ERROR = "platform_error"
    CANCELLED = "cancelled"  # its submitter, a task owner or an admin stopped it
    IMAGE_GONE = "image_gone"  # the model's image is no longer kept (retention) or was lost

    @property
    def user_caused(self) -> bool:
        """Whether the submission (not the platform) is to blame; platform faults are retried.
        A cancel is nobody's fault (it must not count against quotas) yet never retried
        (see RetryPolicy). Nor is a gone image: the platform's retention removed it."""
        return self not in (
            FailureCode.WORKER_LOST,
            FailureCode.PLATFORM_ERROR,
            FailureCode.CANCELLED,
            FailureCode.IMAGE_GONE,
        )

    @property
    def platform_fault(self) -> bool:
        """Whether the platform broke (a lost worker, a platform error): counted per job
        apart from what the submission caused, retried while attempts remain, never
        charged. A cancel is neither."""
        return self in (FailureCode.WORKER_LOST, FailureCode.PLATFORM_ERROR)


def is_platform_fault(code: str) -> bool:
    """``platform_fault`` of a stored code; an unknown code is our bug, so ours too."""
    try:
        return FailureCode(code).platform_fault
    except ValueError:
        return True
