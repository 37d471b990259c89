"""The job lifecycle as data: the transition table, the retry decision, the back-off."""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import product

import pytest

from configs.vocabulary.failures import FailureCode, is_platform_fault
from configs.vocabulary.jobs import (
    DEFAULT_RETRY_POLICY,
    TRANSITIONS,
    AttemptOutcome,
    IllegalTransition,
    JobStatus,
    RetryPolicy,
    Settlement,
    check_transition,
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


NOT_USER_CAUSED = (
    FailureCode.WORKER_LOST,
    FailureCode.PLATFORM_ERROR,
    FailureCode.CANCELLED,
    FailureCode.IMAGE_GONE,
)
USER_CAUSED = [c for c in FailureCode if c not in NOT_USER_CAUSED]


NOW = datetime(2026, 1, 1, 12, 0, 0)


def requeued(code: str, delay_s: int) -> Settlement:
    return Settlement(Q, NOW + timedelta(seconds=delay_s), f"retrying after {code}")


FINAL = Settlement(F, None, "failed")


@pytest.mark.parametrize(
    ("code", "attempt", "faults_before", "settlement"),
    [
        ("platform_error", 1, 0, requeued("platform_error", 5)),
        ("platform_error", 2, 1, requeued("platform_error", 10)),
        ("platform_error", 3, 2, requeued("platform_error", 20)),  # not the submitter's 3
        ("platform_error", 5, 3, requeued("platform_error", 80)),
        ("platform_error", 5, 4, FINAL),  # the platform's own budget of 5 is spent
        ("platform_error", 9, 4, FINAL),
        ("worker_lost", 4, 3, requeued("worker_lost", 40)),
        ("worker_lost", 5, 4, FINAL),
        ("an_unknown_code", 1, 0, requeued("an_unknown_code", 5)),  # our bug, not theirs
        ("an_unknown_code", 5, 4, FINAL),
        ("cancelled", 1, 0, FINAL),  # not the submitter's fault, yet never run again
        (FailureCode.CANCELLED, 2, 0, FINAL),
        ("image_gone", 1, 0, FINAL),  # retention removed it: no attempt brings it back
        (FailureCode.IMAGE_GONE, 2, 0, FINAL),
        *[(code.value, 1, 0, FINAL) for code in USER_CAUSED],
        *[(code, 1, 0, FINAL) for code in USER_CAUSED],  # the enum decides like its value
    ],
)
def test_decide(code: str, attempt: int, faults_before: int, settlement: Settlement) -> None:
    decided = DEFAULT_RETRY_POLICY.decide(code, attempt, NOW, platform_faults=faults_before)
    assert decided == settlement


def test_the_platform_budget_is_a_policy_setting() -> None:
    strict = RetryPolicy(platform_budget=1)
    assert strict.decide("worker_lost", 1, NOW) == FINAL
    assert RetryPolicy(platform_budget=2).decide("worker_lost", 1, NOW).status == Q


def test_blame_of_the_codes_that_are_nobodys_fault() -> None:
    assert [c for c in FailureCode if not c.user_caused] == list(NOT_USER_CAUSED)


def test_every_settlement_is_a_legal_move_of_a_running_job() -> None:
    for code, attempt in product(FailureCode, range(1, 5)):
        settlement = DEFAULT_RETRY_POLICY.decide(code, attempt, NOW)
        assert check_transition(R, settlement.status) is settlement.status
        assert (settlement.available_at is None) == settlement.status.final


def test_decide_is_pure() -> None:
    first = DEFAULT_RETRY_POLICY.decide("platform_error", 1, NOW)
    assert DEFAULT_RETRY_POLICY.decide("platform_error", 1, NOW) == first
    later = DEFAULT_RETRY_POLICY.decide("platform_error", 1, NOW + timedelta(hours=1))
    assert later.available_at == first.available_at + timedelta(hours=1)


def test_user_caused_codes() -> None:
    assert not FailureCode.PLATFORM_ERROR.user_caused
    assert not FailureCode.WORKER_LOST.user_caused
    assert all(code.user_caused for code in USER_CAUSED)
    assert {"oom_killed", "total_timeout", "never_healthy", "label_outside_set"} <= {
        c.value for c in USER_CAUSED
    }


@pytest.mark.parametrize(
    ("attempt", "seconds"),
    [(0, 5), (1, 5), (2, 10), (3, 20), (4, 40), (6, 160), (7, 300), (50, 300), (10**6, 300)],
)
def test_retry_delay_is_exponential_and_capped(attempt: int, seconds: int) -> None:
    assert DEFAULT_RETRY_POLICY.delay(attempt) == timedelta(seconds=seconds)


def test_a_policy_sets_its_own_back_off() -> None:
    policy = RetryPolicy(first_delay_s=1, max_delay_s=3)
    assert [policy.delay(n).total_seconds() for n in (1, 2, 3, 4)] == [1, 2, 3, 3]
    assert policy.decide("worker_lost", 2, NOW).available_at == NOW + timedelta(seconds=2)


def test_platform_faults_are_the_platforms_and_never_the_submitters() -> None:
    platform = {c for c in FailureCode if c.platform_fault}
    assert platform == {FailureCode.WORKER_LOST, FailureCode.PLATFORM_ERROR}
    assert not any(c.user_caused for c in platform)  # so quotas never charge them
    assert not FailureCode.CANCELLED.platform_fault and not FailureCode.CRASHED.platform_fault
    assert is_platform_fault("worker_lost") and is_platform_fault("a-code-from-the-future")
    assert not is_platform_fault("oom_killed")


def test_attempt_outcomes_fit_their_column() -> None:
    assert {o.value for o in AttemptOutcome} == {
        "done",
        "failed",
        "lost",
        "cancelled",
        "handed_back",
    }
    assert max(len(o.value) for o in AttemptOutcome) <= 16  # job_attempts.outcome
