"""The queue under faults, on both backends (SQLite and a throwaway PostgreSQL cluster):
per-claim lease tokens, outcomes recorded exactly once, a restart settling its dead
predecessor's jobs, hand-backs, platform faults counted apart (and never charged), an
operator's retry, and whether a lease is alive. Time is a ManualClock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, select

from configs.vocabulary.clock import ManualClock
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import DEFAULT_RETRY_POLICY, JobStatus
from configs.vocabulary.results import EvaluationResult, Failure
from store.accounts import Accounts
from store.db import Database
from store.jobs import ClaimedJob, JobStore
from store.leases import NotRetryable
from store.models import AttemptRow, JobRow, ResultRow
from store.quotas import charged_usage

RUNTIME = {"kind": "docker", "image": "example/model:1", "protocol": "v1"}
POLICY = DEFAULT_RETRY_POLICY


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    yield database
    database.dispose()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(db: Database, clock: ManualClock) -> JobStore:
    jobs = JobStore(db, clock)
    jobs.register_task("sentiment", 1, {"name": "sentiment"})
    return jobs


def done() -> EvaluationResult:
    return EvaluationResult("sentiment", "done", summary={"performance": 1.0})


def row(db: Database, job_id: str) -> JobRow:
    with db.session() as session:
        job = session.get(JobRow, job_id)
        assert job is not None
        return job


def attempt_rows(db: Database, job_id: str) -> list[AttemptRow]:
    with db.session() as session:
        query = select(AttemptRow).where(AttemptRow.job_id == job_id).order_by(AttemptRow.id)
        return list(session.scalars(query))


def results(db: Database, job_id: str) -> int:
    with db.session() as session:
        return session.scalar(select(func.count()).where(ResultRow.job_id == job_id)) or 0


def claim(store: JobStore, worker: str = "w", domain: str | None = None) -> ClaimedJob:
    job = store.claim(worker, 60, domain=domain)
    assert job is not None
    return job


def submit(store: JobStore, owner_id: str | None = None) -> str:
    return store.submit("sentiment", "m", RUNTIME, owner_id=owner_id)[1]


def wait_out_back_off(store: JobStore, clock: ManualClock, job_id: str) -> None:
    clock.advance((row(store.db, job_id).available_at - clock.now()).total_seconds())


def lose_worker(store: JobStore, clock: ManualClock) -> list[str]:
    """The worker holding the lease dies: its lease runs out and it is recovered."""
    clock.advance(61)
    return store.requeue_stalled(POLICY)


# -- lease tokens ----------------------------------------------------------------------------
def test_every_claim_has_its_own_token_and_only_that_token_holds_the_job(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    """Two live workers with one id: the stalled first claim must not heartbeat, finish or
    fail the job the second claim now runs (a worker-id check alone would let it)."""
    job_id = submit(store)
    first = claim(store, "same-id")
    assert lose_worker(store, clock) == [job_id]
    wait_out_back_off(store, clock, job_id)
    second = claim(store, "same-id")
    assert first.lease != second.lease and len(second.lease) >= 32
    stale = Failure(FailureCode.PLATFORM_ERROR, "late")
    settlement = POLICY.decide(stale.code, first.attempt, clock.now())
    assert not store.heartbeat(job_id, "same-id", 60, 0.9, "late", lease=first.lease)
    assert not store.finish(job_id, "same-id", done(), lease=first.lease)
    assert store.fail(job_id, "same-id", stale, settlement, lease=first.lease) is None
    assert (row(db, job_id).status, results(db, job_id)) == ("running", 0)
    assert store.heartbeat(job_id, "same-id", 60, 0.5, "r1", lease=second.lease)
    assert store.finish(job_id, "same-id", done(), lease=second.lease)
    assert row(db, job_id).status == "done" and results(db, job_id) == 1


def test_a_finish_retried_after_a_lost_acknowledgement_writes_nothing_twice(
    store: JobStore, db: Database
) -> None:
    job_id = submit(store)
    job = claim(store)
    assert store.finish(job_id, "w", done(), lease=job.lease)
    # The commit went through but its acknowledgement was lost: the worker tries again.
    assert store.finish(job_id, "w", done(), lease=job.lease)  # "already recorded by me"
    assert results(db, job_id) == 1
    assert [a.outcome for a in attempt_rows(db, job_id)] == ["done"]
    assert not store.finish(job_id, "w", done(), lease="someone-else")


def test_a_fail_retried_after_a_lost_acknowledgement_writes_nothing_twice(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    job_id = submit(store)
    job = claim(store)
    crash = Failure(FailureCode.CRASHED, "exited with code 3")
    settlement = POLICY.decide(crash.code, job.attempt, clock.now())
    assert store.fail(job_id, "w", crash, settlement, lease=job.lease) == JobStatus.FAILED
    assert store.fail(job_id, "w", crash, settlement, lease=job.lease) == JobStatus.FAILED
    assert [(a.outcome, a.failure_code) for a in attempt_rows(db, job_id)] == [
        ("failed", "crashed")
    ]


def test_lease_alive_while_running_and_unexpired(store: JobStore, clock: ManualClock) -> None:
    job_id = submit(store)
    job = claim(store)
    assert store.lease_alive(job.lease) and not store.lease_alive("no-such-lease")
    clock.advance(60)
    assert store.lease_alive(job.lease)  # up to its last instant
    clock.advance(1)
    assert not store.lease_alive(job.lease)  # expired, even before anyone requeues it
    assert store.heartbeat(job_id, "w", 60, 0.1, "r1", lease=job.lease)  # renewed: alive
    assert store.lease_alive(job.lease)
    assert store.finish(job_id, "w", done(), lease=job.lease)
    assert not store.lease_alive(job.lease)


# -- a restart settles its predecessor's jobs ----------------------------------------------------
def test_a_restart_settles_only_its_own_domains_jobs_at_once(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    mine, other_host, other_id = submit(store), submit(store), submit(store)
    claim(store, "w", domain="domain-a")
    claim(store, "w", domain="domain-b")  # same id, another lock folder: maybe alive
    claim(store, "v", domain="domain-a")  # another id in the same folder
    assert store.settle_predecessor("w", "domain-a", POLICY) == [mine]  # no lease waited out
    job = row(db, mine)
    assert (job.status, job.failure_code, job.platform_faults) == ("queued", "worker_lost", 1)
    assert job.available_at == clock.now() + POLICY.delay(1)  # the lifecycle's back-off
    assert [a.outcome for a in attempt_rows(db, mine)] == ["lost"]
    assert row(db, other_host).status == row(db, other_id).status == "running"
    assert store.settle_predecessor("w", "domain-a", POLICY) == []


# -- hand-back -------------------------------------------------------------------------------
def test_release_hands_a_job_back_at_once_without_charging_an_attempt(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    job_id = submit(store)
    job = claim(store)
    assert not store.release(job_id, "not-the-lease")
    assert store.release(job_id, job.lease)
    queued = row(db, job_id)
    assert (queued.status, queued.lease_token, queued.available_at) == ("queued", None, clock.now())
    assert queued.max_attempts - queued.attempts == 3  # the full budget is left
    assert [a.outcome for a in attempt_rows(db, job_id)] == ["handed_back"]
    assert not store.release(job_id, job.lease)  # once
    assert not store.finish(job_id, "w", done(), lease=job.lease)  # the old run records nothing
    again = claim(store)
    assert (again.id, again.attempt) == (job_id, 2)


# -- platform faults and the operator's retry --------------------------------------------------
def test_worker_deaths_end_failed_as_the_platforms_fault_and_are_never_charged(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    user = Accounts(db, clock).add_user("researcher", "researcher")["id"]
    job_id = submit(store, owner_id=user)
    day = datetime(2000, 1, 1)
    for _ in range(POLICY.platform_budget):
        claim(store)
        assert charged_usage(db, user, "sentiment", day).total == 1  # a live job is charged
        assert lose_worker(store, clock) == [job_id]
        clock.advance(600)  # past any back-off
    job = row(db, job_id)
    assert (job.status, job.failure_code, job.platform_faults) == ("failed", "worker_lost", 5)
    assert "5 platform faults" in job.stage
    assert charged_usage(db, user, "sentiment", day).total == 0


def test_an_operator_retries_a_failed_job_with_a_fresh_budget_and_its_history_kept(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    job_id = submit(store)
    for _ in range(POLICY.platform_budget):
        claim(store)
        lose_worker(store, clock)
        clock.advance(600)
    assert row(db, job_id).status == "failed"
    store.retry(job_id)
    job = row(db, job_id)
    assert (job.status, job.failure_code, job.finished_at, job.platform_faults) == (
        "queued",
        None,
        None,
        0,
    )
    assert (job.attempts, job.max_attempts, job.available_at) == (5, 8, clock.now())
    again = claim(store)
    assert again.attempt == 6 and again.max_attempts == 8
    assert [a.outcome for a in attempt_rows(db, job_id)] == ["lost"] * 5 + [None]
    with pytest.raises(NotRetryable, match="is running; only failed jobs"):
        store.retry(job_id)
    assert store.finish(job_id, "w", done(), lease=again.lease)
    with pytest.raises(NotRetryable, match="is done"):
        store.retry(job_id)
    with pytest.raises(KeyError):
        store.retry("no-such-job")


def test_requeue_stalled_settles_at_most_its_limit_per_call(
    store: JobStore, clock: ManualClock
) -> None:
    ids = {submit(store) for _ in range(3)}
    for _ in ids:
        claim(store, "dead")
    clock.advance(61)
    first = store.requeue_stalled(POLICY, limit=2)
    assert len(first) == 2
    assert set(first + store.requeue_stalled(POLICY, limit=2)) == ids


def test_expired_leases_are_settled_oldest_first(store: JobStore, clock: ManualClock) -> None:
    old, new = submit(store), submit(store)
    claim(store, "dead", domain=None)
    clock.advance(timedelta(seconds=10).total_seconds())
    claim(store, "dead")
    clock.advance(61)
    assert store.requeue_stalled(POLICY, limit=1) == [old]
    assert store.requeue_stalled(POLICY, limit=1) == [new]
