"""The job store contract on both production backends (a SQLite file and a throwaway
PostgreSQL cluster, where claims take the ``FOR UPDATE SKIP LOCKED`` branch): submit, claim with a lease, heartbeat,
finish in one transaction, fail / retry, requeue stalled jobs, and the read-side queries.

Time is a ManualClock: leases expire and back-offs pass when a test advances it, never by
waiting, and every time the store writes is checked exactly."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError

from configs.vocabulary.clock import ManualClock
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import (
    DEFAULT_RETRY_POLICY,
    IllegalTransition,
    JobStatus,
    RetryPolicy,
    Settlement,
)
from configs.vocabulary.results import EvaluationResult, Failure, Score, ScoreKey
from store.db import Database
from store.jobs import ClaimedJob, JobStore
from store.models import AttemptRow, JobRow, ModelRow, ResultRow, ScoreRow
from store.queries import Queries

RUNTIME = {"kind": "docker", "image": "example/model:1", "protocol": "v1"}


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


def key(round_name: str = "r1", metric: str = "macro_f1", **extra: object) -> ScoreKey:
    return ScoreKey("sentiment", round_name, "test", "h" * 64, metric=metric, **extra)  # type: ignore[arg-type]


def result(performance: float = 80.0, scores: list[Score] | None = None) -> EvaluationResult:
    scores = (
        scores
        if scores is not None
        else [
            Score(key("r1"), performance, 84, performance - 5, performance + 5),
            Score(key("r2"), performance - 10, 84),
            Score(key("r1", "agreement", variant="typo", variant_version="1"), 95.0, 84),
        ]
    )
    return EvaluationResult(
        task="sentiment",
        status="done",
        summary={
            "performance": performance,
            "throughput": 100.0,
            "memory": 0.5,
            "robustness": 90.0,
            "fairness": 99.0,
            "metric": "macro_f1",
        },
        rounds=[{"round": "r1", "performance": performance}, {"round": "r2", "performance": 1.0}],
        scores=scores,
        profile={"throughput": {"examples_per_s": 100.0}},
        provenance={"code_version": "test", "dataset_hashes": {"r1/test": "h" * 64}},
    )


def job_row(db: Database, job_id: str) -> JobRow:
    with db.session() as session:
        return session.get(JobRow, job_id)


def attempts(db: Database, job_id: str) -> list[AttemptRow]:
    with db.session() as session:
        return list(
            session.scalars(
                select(AttemptRow).where(AttemptRow.job_id == job_id).order_by(AttemptRow.attempt)
            )
        )


def count(db: Database, table: type) -> int:
    with db.session() as session:
        return session.scalar(select(func.count()).select_from(table))


def fail(
    store: JobStore,
    job: ClaimedJob,
    failure: Failure,
    worker: str = "w",
    *,
    lease: str | None = None,
) -> JobStatus | None:
    """What a worker does with a failed attempt: decide with the lifecycle, let the store
    apply it under the claim's lease (``lease`` overrides the token, for intruders)."""
    settlement = DEFAULT_RETRY_POLICY.decide(
        failure.code, job.attempt, store.clock.now(), platform_faults=job.platform_faults
    )
    token = job.lease if lease is None else lease
    return store.fail(job.id, worker, failure, settlement, lease=token)


def requeue_stalled(store: JobStore) -> list[str]:
    return store.requeue_stalled(DEFAULT_RETRY_POLICY)


def claim(store: JobStore, worker: str = "w", lease_s: float = 60) -> ClaimedJob:
    job = store.claim(worker, lease_s)
    assert job is not None
    return job


# -- submit ----------------------------------------------------------------------------------
def test_submit_creates_model_and_queued_job(store: JobStore, db: Database) -> None:
    model_id, job_id = store.submit("sentiment", "my-model", RUNTIME, image_id="sha256:abc")
    job = job_row(db, job_id)
    assert job.model_id == model_id and job.task == "sentiment"
    assert job.status == JobStatus.QUEUED and job.attempts == 0 and job.max_attempts == 3
    with db.session() as session:
        model = session.get(ModelRow, model_id)
    assert model.name == "my-model" and model.runtime == RUNTIME and model.image_id == "sha256:abc"
    assert store.count_models() == 1


def test_submit_is_atomic_unknown_task_stores_nothing(store: JobStore, db: Database) -> None:
    with pytest.raises(IntegrityError):
        store.submit("no-such-task", "m", RUNTIME)  # foreign key on tasks.name
    assert count(db, ModelRow) == 0
    assert count(db, JobRow) == 0


def test_register_task_updates_in_place(store: JobStore) -> None:
    store.register_task("sentiment", 2, {"name": "sentiment", "v": 2})
    store.register_task("nli", 1, {"name": "nli"})
    assert Queries(store.db).task_names() == ["nli", "sentiment"]


# -- claim -----------------------------------------------------------------------------------
def test_claim_gives_the_oldest_available_job(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    ids = []
    for i in range(3):
        ids.append(store.submit("sentiment", f"m{i}", RUNTIME)[1])
        clock.advance(1)  # distinct creation times: the order is the store's, not the test's
    claimed = store.claim("w1", lease_s=60)
    assert claimed is not None and claimed.id == ids[0]
    assert claimed.runtime == RUNTIME and claimed.attempt == 1 and claimed.max_attempts == 3
    job = job_row(db, ids[0])
    assert job.status == JobStatus.RUNNING and job.lease_owner == "w1"
    assert job.heartbeat_at == job.started_at == clock.now()
    assert job.lease_expires_at == clock.now() + timedelta(seconds=60)
    assert [a.worker for a in attempts(db, ids[0])] == ["w1"]
    assert store.claim("w2", 60).id == ids[1]
    assert store.claim("w3", 60).id == ids[2]
    assert store.claim("w4", 60) is None


def test_claim_skips_jobs_not_yet_available(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    _, job_id = store.submit("sentiment", "m", RUNTIME)
    with db.session() as session, session.begin():
        session.execute(
            update(JobRow)
            .where(JobRow.id == job_id)
            .values(available_at=clock.now() + timedelta(minutes=5))
        )
    assert store.claim("w", 60) is None
    clock.advance(299)
    assert store.claim("w", 60) is None
    clock.advance(1)  # available_at itself counts as available
    assert claim(store).id == job_id


def test_concurrent_claims_never_share_a_job(database_url: str) -> None:
    url = database_url
    setup = Database(url)
    store = JobStore(setup)
    store.register_task("sentiment", 1, {})
    jobs = {store.submit("sentiment", f"m{i}", RUNTIME)[1] for i in range(40)}
    claimed: list[tuple[str, str]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def hammer(worker: str) -> None:
        own = JobStore(Database(url, run_migrations=False))  # one engine per "machine"
        start.wait()
        misses = 0
        try:
            while misses < 3:
                job = own.claim(worker, 60)
                if job is None:
                    misses += 1
                    continue
                with lock:
                    claimed.append((job.id, worker))
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)
        finally:
            own.db.dispose()

    threads = [threading.Thread(target=hammer, args=(f"w{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    counts = Counter(job_id for job_id, _ in claimed)
    assert [j for j, n in counts.items() if n > 1] == [], "a job was claimed twice"
    assert set(counts) == jobs
    with setup.session() as session:
        rows = session.scalars(select(JobRow)).all()
        assert {row.status for row in rows} == {JobStatus.RUNNING}
        assert all(row.attempts == 1 for row in rows)
        assert session.scalar(select(func.count()).select_from(AttemptRow)) == len(jobs)
    owners = dict(claimed)
    assert all(job_row(setup, j).lease_owner == w for j, w in owners.items())
    setup.dispose()


# -- heartbeat -------------------------------------------------------------------------------
def test_heartbeat_extends_lease_and_records_progress(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    _, job_id = store.submit("sentiment", "m", RUNTIME)
    claimed = claim(store, "w1", lease_s=60)
    clock.advance(30)
    assert store.heartbeat(job_id, "w1", 600, 0.42, "round r2 / test: typo", lease=claimed.lease)
    job = job_row(db, job_id)
    assert job.heartbeat_at == clock.now()
    assert job.lease_expires_at == clock.now() + timedelta(seconds=600)
    assert job.progress == pytest.approx(0.42) and job.stage == "round r2 / test: typo"
    assert store.heartbeat(job_id, "w1", 600, 0.5, "x" * 500, lease=claimed.lease)
    assert len(job_row(db, job_id).stage) == 200


def test_heartbeat_by_a_non_owner_fails(store: JobStore, db: Database) -> None:
    _, job_id = store.submit("sentiment", "m", RUNTIME)
    claimed = claim(store, "w1", lease_s=60)
    assert not store.heartbeat(job_id, "intruder", 600, 0.9, "stolen", lease="intruder-token")
    # the owner's token presented under another worker id is no better
    assert not store.heartbeat(job_id, "intruder", 600, 0.9, "stolen", lease=claimed.lease)
    job = job_row(db, job_id)
    assert job.progress == 0.0 and job.stage == "claimed"
    assert job.lease_expires_at == job.started_at + timedelta(seconds=60)  # not extended
    assert not store.heartbeat("no-such-job", "w1", 60, 0.1, "x", lease=claimed.lease)


def test_heartbeat_after_finish_fails(store: JobStore) -> None:
    _, job_id = store.submit("sentiment", "m", RUNTIME)
    claimed = claim(store, "w1")
    assert store.finish(job_id, "w1", result(), lease=claimed.lease)
    assert not store.heartbeat(job_id, "w1", 60, 0.5, "late", lease=claimed.lease)


def test_the_right_worker_id_with_a_wrong_token_is_refused(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    """The token, not the worker id, proves the claim: another live worker sharing the id
    (two hosts with one hostname) cannot heartbeat, finish or fail a job it never claimed."""
    _, job_id = store.submit("sentiment", "m", RUNTIME)
    claimed = claim(store, "w1")
    clock.advance(10)
    forged = "0" * len(claimed.lease)
    assert forged != claimed.lease
    assert not store.heartbeat(job_id, "w1", 600, 0.9, "stolen", lease=forged)
    assert not store.finish(job_id, "w1", result(), lease=forged)
    assert fail(store, claimed, Failure(FailureCode.CRASHED, "x"), "w1", lease=forged) is None
    job = job_row(db, job_id)
    assert (job.status, job.lease_owner, job.lease_token) == ("running", "w1", claimed.lease)
    assert (job.progress, job.stage, job.heartbeat_at) == (0.0, "claimed", job.started_at)
    assert count(db, ScoreRow) == 0 and count(db, ResultRow) == 0
    assert [a.outcome for a in attempts(db, job_id)] == [None]
    # the real claim still holds the job
    assert store.heartbeat(job_id, "w1", 60, 0.5, "working", lease=claimed.lease)
    assert store.finish(job_id, "w1", result(), lease=claimed.lease)


# -- finish ----------------------------------------------------------------------------------
def test_finish_stores_every_score_and_the_result(store: JobStore, db: Database) -> None:
    model_id, job_id = store.submit("sentiment", "m", RUNTIME)
    claimed = claim(store, "w1")
    outcome = result(80.0)
    assert store.finish(job_id, "w1", outcome, lease=claimed.lease)
    job = job_row(db, job_id)
    assert job.status == JobStatus.DONE and job.progress == 1.0 and job.finished_at is not None
    assert job.lease_owner is None and job.lease_expires_at is None
    with db.session() as session:
        scores = session.scalars(select(ScoreRow).where(ScoreRow.job_id == job_id)).all()
        stored = session.get(ResultRow, job_id)
    assert len(scores) == len(outcome.scores)
    assert {(s.round, s.variant, s.metric, s.value) for s in scores} == {
        ("r1", "original", "macro_f1", 80.0),
        ("r2", "original", "macro_f1", 70.0),
        ("r1", "typo", "agreement", 95.0),
    }
    assert stored.model_id == model_id and stored.summary["performance"] == 80.0
    assert stored.provenance["dataset_hashes"] == {"r1/test": "h" * 64}
    assert [a.outcome for a in attempts(db, job_id)] == ["done"]


def test_finish_by_a_non_owner_stores_nothing(store: JobStore, db: Database) -> None:
    _, job_id = store.submit("sentiment", "m", RUNTIME)
    claimed = claim(store, "w1")
    assert not store.finish(job_id, "w2", result(), lease="w2-token")
    # the owner's token presented under another worker id is no better
    assert not store.finish(job_id, "w2", result(), lease=claimed.lease)
    assert job_row(db, job_id).status == JobStatus.RUNNING
    assert count(db, ScoreRow) == 0 and count(db, ResultRow) == 0


def test_finish_with_a_duplicate_score_key_rolls_back_everything(
    store: JobStore, db: Database
) -> None:
    _, job_id = store.submit("sentiment", "m", RUNTIME)
    claimed = claim(store, "w1")
    duplicate = [Score(key("r1"), 1.0, 10), Score(key("r2"), 2.0, 10), Score(key("r1"), 3.0, 10)]
    with pytest.raises(IntegrityError):
        store.finish(job_id, "w1", result(scores=duplicate), lease=claimed.lease)
    job = job_row(db, job_id)
    assert job.status == JobStatus.RUNNING and job.lease_owner == "w1"
    assert count(db, ScoreRow) == 0 and count(db, ResultRow) == 0
    assert [a.outcome for a in attempts(db, job_id)] == [None]
    assert store.finish(job_id, "w1", result(), lease=claimed.lease)  # still holds the job


def test_finish_twice_stores_once(store: JobStore, db: Database) -> None:
    """A second finish writes nothing: by the same claim it is acknowledged as already
    recorded (a retry after a lost acknowledgement), by any other token it is refused."""
    _, job_id = store.submit("sentiment", "m", RUNTIME)
    claimed = claim(store, "w1")
    assert store.finish(job_id, "w1", result(80.0), lease=claimed.lease)
    assert store.finish(job_id, "w1", result(10.0), lease=claimed.lease)
    assert not store.finish(job_id, "w1", result(10.0), lease="another-claim")
    assert count(db, ResultRow) == 1 and count(db, ScoreRow) == len(result().scores)
    with db.session() as session:
        assert session.get(ResultRow, job_id).summary["performance"] == 80.0
    assert [a.outcome for a in attempts(db, job_id)] == ["done"]


# -- fail and retry --------------------------------------------------------------------------
def test_user_caused_failure_is_final_with_code_message_and_log(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    _, job_id = store.submit("sentiment", "m", RUNTIME)
    claimed = claim(store, "w1")
    failure = Failure(
        FailureCode.OOM_KILLED, "the model was killed: out of memory", "line1\nKilled"
    )
    assert fail(store, claimed, failure, "w1") == JobStatus.FAILED
    job = job_row(db, job_id)
    assert job.status == JobStatus.FAILED and job.stage == "failed"
    assert job.finished_at == clock.now()
    assert (job.failure_code, job.failure_message, job.log_tail) == (
        "oom_killed",
        "the model was killed: out of memory",
        "line1\nKilled",
    )
    assert job.lease_owner is None
    history = attempts(db, job_id)
    assert [(a.outcome, a.failure_code) for a in history] == [("failed", "oom_killed")]
    clock.advance(3600)
    assert store.claim("w2", 60) is None  # final, however long one waits


def test_platform_faults_retry_from_their_own_budget_not_the_submitters_attempts(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    """Repeated infrastructure faults never exhaust the submitter's 3 attempts: the platform
    has a budget of its own (5 faults), with exponential back-off in between."""
    _, job_id = store.submit("sentiment", "m", RUNTIME, max_attempts=3)
    fault = Failure(FailureCode.PLATFORM_ERROR, "docker engine went away")
    for attempt, delay_s in ((1, 5), (2, 10), (3, 20), (4, 40)):
        claimed = claim(store)
        assert claimed.id == job_id and claimed.attempt == attempt
        assert fail(store, claimed, fault) == JobStatus.QUEUED
        job = job_row(db, job_id)
        assert job.status == JobStatus.QUEUED and job.stage == "retrying after platform_error"
        assert job.failure_code == "platform_error" and job.finished_at is None
        assert job.available_at == clock.now() + timedelta(seconds=delay_s)
        assert job.max_attempts - job.attempts == 3  # none of the submitter's attempts spent
        clock.advance(delay_s - 1)
        assert store.claim("w", 60) is None  # backing off
        clock.advance(1)
    claimed = claim(store)
    assert claimed.attempt == 5 and claimed.platform_faults == 4
    assert fail(store, claimed, fault) == JobStatus.FAILED
    job = job_row(db, job_id)
    assert job.status == JobStatus.FAILED and job.stage == "failed: gave up after 5 platform faults"
    assert [(a.attempt, a.outcome) for a in attempts(db, job_id)] == [
        (n, "failed") for n in range(1, 6)
    ]


def test_the_store_applies_the_settlement_it_is_given(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    """The retry decision is the caller's: the store moves the job as told, under its lease
    check, and only along the transition table."""
    _, job_id = store.submit("sentiment", "m", RUNTIME, max_attempts=3)
    fault = Failure(FailureCode.PLATFORM_ERROR, "x")
    later = clock.now() + timedelta(hours=2)
    told = Settlement(JobStatus.QUEUED, later, "parked by the operator")
    first = claim(store)
    assert store.fail(first.id, "w", fault, told, lease=first.lease) == JobStatus.QUEUED
    job = job_row(db, job_id)
    assert (job.status, job.available_at, job.stage) == ("queued", later, "parked by the operator")
    clock.advance(7200)
    claimed = claim(store)
    with pytest.raises(IllegalTransition, match="from running to running"):
        limbo = Settlement(JobStatus.RUNNING, None, "limbo")
        store.fail(claimed.id, "w", fault, limbo, lease=claimed.lease)
    assert [a.outcome for a in attempts(db, job_id)] == ["failed", None]  # rolled back


def test_fail_by_a_non_owner_is_ignored(store: JobStore, db: Database) -> None:
    _, job_id = store.submit("sentiment", "m", RUNTIME)
    claimed = claim(store, "w1")
    crash = Failure(FailureCode.CRASHED, "x")
    assert fail(store, claimed, crash, "w2", lease="w2-token") is None
    # the owner's token presented under another worker id is no better
    assert fail(store, claimed, crash, "w2") is None
    assert job_row(db, job_id).status == JobStatus.RUNNING
    assert [a.outcome for a in attempts(db, job_id)] == [None]


# -- stalled jobs ----------------------------------------------------------------------------
def test_requeue_stalled_requeues_an_expired_lease(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    _, job_id = store.submit("sentiment", "m", RUNTIME)
    dead = claim(store, "dead-worker", lease_s=60)
    clock.advance(60)
    assert requeue_stalled(store) == []  # lease still valid up to its last instant
    clock.advance(1)
    assert requeue_stalled(store) == [job_id]
    job = job_row(db, job_id)
    assert job.status == JobStatus.QUEUED and job.lease_owner is None
    assert job.failure_code == "worker_lost" and job.stage == "retrying after worker_lost"
    assert job.available_at == clock.now() + timedelta(seconds=5)  # backs off like any retry
    history = attempts(db, job_id)
    assert [(a.worker, a.outcome, a.failure_code) for a in history] == [
        ("dead-worker", "lost", "worker_lost")
    ]
    assert history[0].finished_at == clock.now()
    # a zombie, token in hand, can neither renew nor finish the lease it lost
    assert not store.heartbeat(job_id, "dead-worker", 60, 0.5, "zombie", lease=dead.lease)
    assert not store.finish(job_id, "dead-worker", result(), lease=dead.lease)
    clock.advance(5)
    again = claim(store, "w2")
    assert again.id == job_id and again.attempt == 2
    # nor once another worker has taken the job over
    assert not store.heartbeat(job_id, "dead-worker", 60, 0.5, "zombie", lease=dead.lease)
    assert not store.finish(job_id, "dead-worker", result(), lease=dead.lease)
    assert store.finish(job_id, "w2", result(), lease=again.lease)
    assert [a.outcome for a in attempts(db, job_id)] == ["lost", "done"]


def test_a_heartbeat_keeps_a_lease_from_expiring(store: JobStore, clock: ManualClock) -> None:
    _, job_id = store.submit("sentiment", "m", RUNTIME)
    claimed = claim(store, "w1", lease_s=60)
    for _ in range(10):  # ten minutes of work, a beat every 50 s
        clock.advance(50)
        assert store.heartbeat(job_id, "w1", 60, 0.5, "working", lease=claimed.lease)
        assert requeue_stalled(store) == []


def test_requeue_stalled_fails_once_the_platform_budget_is_spent(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    _, job_id = store.submit("sentiment", "m", RUNTIME, max_attempts=1)
    store.claim("dead-worker", lease_s=60)
    clock.advance(61)
    assert store.requeue_stalled(RetryPolicy(platform_budget=1)) == [job_id]
    job = job_row(db, job_id)
    assert job.status == JobStatus.FAILED and job.failure_code == "worker_lost"
    assert job.finished_at == clock.now() and job.stage == "failed: gave up after 1 platform fault"
    assert job.platform_faults == 1  # counted apart from what the submission caused


def test_a_lost_worker_spends_none_of_a_one_attempt_budget(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    _, job_id = store.submit("sentiment", "m", RUNTIME, max_attempts=1)
    store.claim("dead-worker", lease_s=60)
    clock.advance(61)
    assert requeue_stalled(store) == [job_id]
    job = job_row(db, job_id)
    assert (job.status, job.attempts, job.max_attempts) == (JobStatus.QUEUED, 1, 2)


def test_requeue_stalled_decides_with_the_policy_it_is_given(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    _, job_id = store.submit("sentiment", "m", RUNTIME)
    store.claim("dead-worker", lease_s=60)
    clock.advance(61)
    assert store.requeue_stalled(RetryPolicy(first_delay_s=42)) == [job_id]
    assert job_row(db, job_id).available_at == clock.now() + timedelta(seconds=42)


def test_requeue_stalled_leaves_live_and_finished_jobs_alone(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    _, live = store.submit("sentiment", "live", RUNTIME)
    clock.advance(1)  # claims go oldest first: equal times would make the order arbitrary
    _, done = store.submit("sentiment", "done", RUNTIME)
    claim(store, "w1", 600)
    second = claim(store, "w2", 600)
    assert second.id == done
    assert store.finish(done, "w2", result(), lease=second.lease)
    clock.advance(599)
    assert requeue_stalled(store) == []
    assert job_row(db, live).status == JobStatus.RUNNING
    assert job_row(db, done).status == JobStatus.DONE


# -- queries ---------------------------------------------------------------------------------
def test_queries_submission_status_results_and_scores(store: JobStore, db: Database) -> None:
    queries = Queries(db)
    assert queries.submission("missing") is None
    model_id, job_id = store.submit("sentiment", "m", {**RUNTIME, "secret": "x"})
    queued = queries.submission(model_id)
    assert queued["job"]["status"] == "queued" and queued["results"] is None
    assert "secret" not in queued["runtime"]
    claimed = claim(store, "w1")
    assert store.heartbeat(job_id, "w1", 60, 0.25, "round r1", lease=claimed.lease)
    running = queries.submission(model_id)["job"]
    assert (running["status"], running["progress"], running["stage"]) == (
        "running",
        0.25,
        "round r1",
    )
    assert store.finish(job_id, "w1", result(75.0), lease=claimed.lease)
    done = queries.submission(model_id, with_scores=True)
    assert done["job"]["status"] == "done" and done["job"]["finished_at"].endswith("Z")
    assert done["results"]["performance"] == 75.0
    assert {"rounds", "slices", "profile", "provenance"} <= set(done["results"])
    assert len(done["scores"]) == 3
    assert {"round", "dataset_hash", "variant", "slice", "metric", "value"} <= set(
        done["scores"][0]
    )
    assert queries.job_counts() == {"done": 1}


def test_queries_leaderboard_rows_keep_each_models_newest_result(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    queries = Queries(db)
    first, job1 = store.submit("sentiment", "a", RUNTIME)
    clock.advance(1)  # claims go oldest first: equal times would make the order arbitrary
    second, job2 = store.submit("sentiment", "b", RUNTIME)
    clock.advance(1)
    store.submit("sentiment", "queued-only", RUNTIME)
    for job_id, performance in ((job1, 60.0), (job2, 70.0)):
        claimed = claim(store)
        assert claimed.id == job_id
        assert store.finish(job_id, "w", result(performance), lease=claimed.lease)
    rows = {row["name"]: row for row in queries.leaderboard_rows("sentiment")}
    assert set(rows) == {"a", "b"}
    assert rows["a"]["performance"] == 60.0 and rows["b"]["model_id"] == second
    assert rows["a"]["rounds"][0]["round"] == "r1"
    # the hashes come out of the provenance in SQL (JSON paths on SQLite and PostgreSQL)
    assert rows["a"]["dataset_hashes"] == {"r1/test": "h" * 64}
    assert len(queries.submissions("sentiment")) == 3
    assert len(queries.submissions("sentiment", limit=1)) == 1
    assert queries.submissions("nli") == []
    assert first != second


def test_a_retry_that_succeeds_shows_no_failure(
    store: JobStore, db: Database, clock: ManualClock
) -> None:
    _, job_id = store.submit("sentiment", "m", RUNTIME, max_attempts=3)
    fault = Failure(FailureCode.PLATFORM_ERROR, "docker engine went away", "log")
    assert fail(store, claim(store), fault) == JobStatus.QUEUED
    clock.advance(5)
    retried = claim(store)
    assert store.finish(job_id, "w", result(), lease=retried.lease)
    job = job_row(db, job_id)
    assert job.status == JobStatus.DONE
    assert (job.failure_code, job.failure_message, job.log_tail) == (None, None, None)
    history = [(a.attempt, a.outcome, a.failure_code) for a in attempts(db, job_id)]
    assert history == [(1, "failed", "platform_error"), (2, "done", None)]
