"""The job lifecycle as data: the transition table, the retry decision, the back-off."""

from __future__ import annotations

from datetime import timedelta
from itertools import product

import pytest

from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import (
    TRANSITIONS,
    IllegalTransition,
    JobStatus,
    check_transition,
    retry_delay,
    should_retry,
)

Q, R, D, F = JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.DONE, JobStatus.FAILED
ALLOWED = {
    (Q, R),
    (Q, F),  # claimed; cancelled/refused before it ran
    (R, D),
    (R, F),
    (R, Q),  # finished; failed; platform fault or lost worker → retried
    (D, Q),  # re-scored when a round is added
    (F, Q),  # an operator's explicit retry
}


@pytest.mark.parametrize(("source", "target"), list(product(JobStatus, JobStatus)))
def test_transition_table(source: JobStatus, target: JobStatus) -> None:
    if (source, target) in ALLOWED:
        assert check_transition(source, target) == target
    else:
        with pytest.raises(IllegalTransition, match=f"from {source} to {target}"):
            check_transition(source, target)


def test_transition_table_covers_every_status() -> None:
    assert set(TRANSITIONS) == set(JobStatus)
    assert {(s, t) for s, targets in TRANSITIONS.items() for t in targets} == ALLOWED


def test_check_transition_accepts_stored_strings_and_rejects_unknown_ones() -> None:
    assert check_transition("queued", "running") is JobStatus.RUNNING
    with pytest.raises(ValueError):
        check_transition("queued", "paused")
    with pytest.raises(ValueError):
        check_transition("limbo", "running")


def test_final_statuses() -> None:
    assert {s for s in JobStatus if s.final} == {D, F}


USER_CAUSED = [
    c for c in FailureCode if c not in (FailureCode.WORKER_LOST, FailureCode.PLATFORM_ERROR)
]


@pytest.mark.parametrize(
    ("code", "attempt", "max_attempts", "retry"),
    [
        ("platform_error", 1, 3, True),
        ("platform_error", 2, 3, True),
        ("platform_error", 3, 3, False),
        ("platform_error", 4, 3, False),
        ("platform_error", 1, 1, False),
        ("worker_lost", 1, 3, True),
        ("worker_lost", 3, 3, False),
        ("an_unknown_code", 1, 3, True),  # unknown → our bug, not the researcher's
        ("an_unknown_code", 3, 3, False),
        *[(code.value, 1, 3, False) for code in USER_CAUSED],
    ],
)
def test_should_retry(code: str, attempt: int, max_attempts: int, retry: bool) -> None:
    assert should_retry(code, attempt, max_attempts) is retry


def test_user_caused_codes() -> None:
    assert not FailureCode.PLATFORM_ERROR.user_caused
    assert not FailureCode.WORKER_LOST.user_caused
    assert all(code.user_caused for code in USER_CAUSED)
    assert {"oom_killed", "total_timeout", "never_healthy", "label_outside_set"} <= {
        c.value for c in USER_CAUSED
    }


@pytest.mark.parametrize(
    ("attempt", "seconds"), [(0, 5), (1, 5), (2, 10), (3, 20), (4, 40), (7, 300), (50, 300)]
)
def test_retry_delay_is_exponential_and_capped(attempt: int, seconds: int) -> None:
    assert retry_delay(attempt) == timedelta(seconds=seconds)
