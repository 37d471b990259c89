"""The worker under faults, on a real SQLite store and a ManualClock: stale leases found
while busy, a restart settling its predecessor, outcomes retried through an outage for as
long as the lease lasts (and written once), quiet outage logs with back-off, a start while
the database is down, graceful stop and hand-back, structured log fields, and the lease
token given to the runtime factory.

Evaluation is stubbed (``StubWorker.evaluate``): these tests are about the queue. Real time
only bounds waits for other threads (never a speed assertion)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from configs.vocabulary.clock import ManualClock
from configs.vocabulary.jobs import DEFAULT_RETRY_POLICY
from configs.vocabulary.results import EvaluationResult
from store.blobs import LocalBlobStore
from store.db import Database
from store.jobs import ClaimedJob, JobStore
from store.models import AttemptRow, JobRow, ResultRow
from worker.lock import lock_dir, lock_domain
from worker.outage import Outage, open_when_reachable
from worker.progress import Progress
from worker.worker import Worker

SPEC = {"kind": "url", "url": "http://127.0.0.1:9", "protocol": "v1"}
BOUND_S = 30.0  # upper bound on any wait for another thread (never a speed assertion)


def unreachable() -> OperationalError:
    return OperationalError("SELECT 1", {}, Exception("could not connect to server"))


class StubWorker(Worker):
    """A worker whose evaluation waits for ``release`` (stepping its progress, so a lost or
    handed-back lease stops it) and then succeeds at once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.release = threading.Event()
        self.running = threading.Event()
        self.stopped_by: list[str] = []

    def evaluate(self, job: ClaimedJob, progress: Progress) -> EvaluationResult:
        self.running.set()
        while not self.release.wait(0.005):
            try:
                progress.update(0.5, "round r1")
            except RuntimeError as exc:  # LeaseLost: the pipeline would stop the runtime
                self.stopped_by.append(type(exc).__name__)
                raise
        return EvaluationResult("toy", "done", summary={"performance": 1.0})


class Flaky:
    """The real store, whose calls named in ``down`` raise as if the database were
    unreachable while ``is_down()``; ``after_commit`` fails ``finish`` once after it committed
    (the acknowledgement is lost)."""

    def __init__(self, store: JobStore, down: set[str], is_down: Callable[[], bool]) -> None:
        self._store, self.down, self.is_down = store, down, is_down
        self.after_commit = False
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._store, name)
        if not callable(real):
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            if name in self.down and self.is_down():
                raise unreachable()
            value = real(*args, **kwargs)
            if name == "finish" and self.after_commit:
                self.after_commit = False
                raise unreachable()
            return value

        return call


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock) -> Iterator[JobStore]:
    db = Database(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    jobs = JobStore(db, clock)
    jobs.register_task("toy", 1, {})
    yield jobs
    db.dispose()


def make_worker(store: Any, tmp_path: Path, **options: Any) -> StubWorker:
    options.setdefault("worker_id", "w1")
    options.setdefault("heartbeat_s", 0.01)
    options.setdefault("poll_s", 0.01)
    return StubWorker(store, LocalBlobStore(tmp_path / "blobs"), {}, **options)


def job_row(store: JobStore, job_id: str) -> JobRow:
    with store.db.session() as session:
        job = session.get(JobRow, job_id)
        assert job is not None
        return job


def outcomes(store: JobStore, job_id: str) -> list[str | None]:
    with store.db.session() as session:
        query = select(AttemptRow.outcome).where(AttemptRow.job_id == job_id)
        return list(session.scalars(query.order_by(AttemptRow.id)))


def results(store: JobStore) -> int:
    with store.db.session() as session:
        return session.scalar(select(func.count()).select_from(ResultRow)) or 0


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def start(worker: Worker, burst: bool = False) -> threading.Thread:
    thread = threading.Thread(target=worker.work, kwargs={"burst": burst}, daemon=True)
    thread.start()
    return thread


def done_result() -> EvaluationResult:
    return EvaluationResult("toy", "done", summary={"performance": 1.0})


# -- dead workers ----------------------------------------------------------------------------
def test_a_busy_worker_recovers_a_dead_workers_job(
    store: JobStore, clock: ManualClock, tmp_path: Path
) -> None:
    """Every worker busy on a long job: stale leases are still found (from the heartbeat
    thread), not only when a worker is idle."""
    busy_id = store.submit("toy", "long", SPEC)[1]
    worker = make_worker(store, tmp_path, reap_every=1)
    thread = start(worker)
    try:
        wait_for(worker.running.is_set, "the long job to run")
        dead_id = store.submit("toy", "orphan", SPEC)[1]
        assert store.claim("dead-worker", 5) is not None
        clock.advance(6)
        wait_for(lambda: dead_id in worker.stats.recovered, "the busy worker to recover it")
        assert job_row(store, dead_id).failure_code == "worker_lost"
        assert job_row(store, busy_id).status == "running"  # its own lease kept renewed
    finally:
        worker.release.set()
        worker.stop()
        thread.join(BOUND_S)
    assert not thread.is_alive() and job_row(store, busy_id).status == "done"


def test_a_restart_takes_its_dead_predecessors_jobs_back_at_once(
    store: JobStore, tmp_path: Path
) -> None:
    mine, elsewhere = store.submit("toy", "a", SPEC)[1], store.submit("toy", "b", SPEC)[1]
    assert store.claim("w1", 60, domain=lock_domain(lock_dir())) is not None
    assert store.claim("w1", 60, domain="another-container") is not None
    stats = make_worker(store, tmp_path).work(burst=True)  # same id, same lock folder
    assert stats.recovered == [mine]  # without waiting out the 60 s lease
    assert (job_row(store, mine).status, outcomes(store, mine)) == ("queued", ["lost"])
    assert job_row(store, elsewhere).status == "running"  # maybe alive: left to its lease


def test_the_lock_folders_domain_is_created_once(tmp_path: Path) -> None:
    domain = lock_domain(tmp_path / "locks")
    assert len(domain) == 32 and lock_domain(tmp_path / "locks") == domain
    assert lock_domain(tmp_path / "other") != domain
    assert [p.name for p in (tmp_path / "locks").iterdir()] == ["domain.id"]


# -- recording through an outage ---------------------------------------------------------------
def test_a_result_is_retried_for_as_long_as_the_lease_is_renewed(
    store: JobStore, clock: ManualClock, tmp_path: Path
) -> None:
    """The store is down for finishing for 100 s (past a 60 s lease); heartbeats still get
    through and keep the lease, so the result is recorded once it is back."""
    job_id = store.submit("toy", "m", SPEC)[1]
    back_at = clock.now().timestamp() + 100
    flaky = Flaky(store, {"finish"}, lambda: clock.now().timestamp() < back_at)

    def pause(seconds: float) -> None:  # time passes, and a heartbeat lands meanwhile
        clock.advance(seconds)
        wait_for(lambda: job_row(store, job_id).heartbeat_at == clock.now(), "a heartbeat")

    worker = make_worker(flaky, tmp_path, pause=pause)
    worker.release.set()
    assert worker.work(burst=True).done == 1
    assert job_row(store, job_id).status == "done" and results(store) == 1
    assert flaky.calls["finish"] > 3


def test_a_store_that_stays_down_leaves_the_job_to_its_lease(
    store: JobStore, clock: ManualClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store.submit("toy", "m", SPEC)
    job = store.claim("w1", 60)
    assert job is not None
    flaky = Flaky(store, {"finish", "fail"}, lambda: True)
    worker = make_worker(flaky, tmp_path, pause=clock.advance, hold_result_s=600)
    with caplog.at_level(logging.INFO):
        worker.record(job, done_result(), Progress(clock.now()))  # returns: the worker lives on
    assert worker.stats.done == 0 and flaky.calls["finish"] >= 5
    claimed_at = job_row(store, job.id).heartbeat_at
    # a finished result is held for hold_result_s of outage, well past the 60 s lease
    assert claimed_at is not None and 600 <= (clock.now() - claimed_at).total_seconds() <= 610
    warnings = [r for r in caplog.records if "cannot reach the store" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].exc_info is None  # one line, no traceback
    assert warnings[0].job_id == job.id  # type: ignore[attr-defined]
    assert "left to its lease" in caplog.text
    clock.advance(1)
    assert store.requeue_stalled(worker.retry_policy) == [job.id]  # any worker recovers it


@pytest.mark.parametrize("outage_s", [75, 600])
def test_a_finished_result_outlives_an_outage_longer_than_its_lease(
    store: JobStore, clock: ManualClock, tmp_path: Path, outage_s: int
) -> None:
    """The database was away for 75 s near the end of a job: the lease expired, another
    worker requeued the job as lost once the store was back, and the live worker threw its
    finished result away. It now keeps it and records it, fenced on the attempt."""
    job_id = store.submit("toy", "m", SPEC)[1]
    job = store.claim("w1", 60)
    assert job is not None and job.id == job_id
    back_at = clock.now().timestamp() + outage_s
    flaky = Flaky(store, {"finish", "heartbeat"}, lambda: clock.now().timestamp() < back_at)
    requeued: list[str] = []

    def pause(seconds: float) -> None:
        clock.advance(seconds)
        if clock.now().timestamp() >= back_at and not requeued:  # the store is back
            requeued.extend(store.requeue_stalled(DEFAULT_RETRY_POLICY))  # another worker

    worker = make_worker(flaky, tmp_path, pause=pause)
    worker.record(job, done_result(), Progress(clock.now()))
    assert requeued == [job_id]  # the lease did expire and the job was taken back
    row = job_row(store, job_id)
    assert (row.status, worker.stats.done, results(store)) == ("done", 1, 1)
    assert outcomes(store, job_id) == ["done"] and row.platform_faults == 0


def test_a_late_result_is_dropped_once_a_newer_attempt_runs(
    store: JobStore, clock: ManualClock, tmp_path: Path
) -> None:
    job_id = store.submit("toy", "m", SPEC)[1]
    job = store.claim("w1", 60)
    assert job is not None
    clock.advance(61)
    assert store.requeue_stalled(DEFAULT_RETRY_POLICY) == [job_id]
    clock.advance(3600)
    newer = store.claim("w2", 60)
    assert newer is not None and newer.attempt == job.attempt + 1
    worker = make_worker(store, tmp_path, pause=clock.advance)
    worker.record(job, done_result(), Progress(clock.now()))
    assert worker.stats.done == 0 and results(store) == 0
    assert job_row(store, job_id).lease_token == newer.lease  # the newer attempt goes on


def test_a_finish_whose_acknowledgement_was_lost_is_recorded_once(
    store: JobStore, clock: ManualClock, tmp_path: Path
) -> None:
    store.submit("toy", "m", SPEC)
    job = store.claim("w1", 60)
    assert job is not None
    flaky = Flaky(store, set(), lambda: False)
    flaky.after_commit = True
    worker = make_worker(flaky, tmp_path, pause=clock.advance)
    worker.record(job, done_result(), Progress(clock.now()))
    assert (flaky.calls["finish"], worker.stats.done, worker.stats.failed) == (2, 1, 0)
    assert job_row(store, job.id).status == "done" and results(store) == 1


# -- outage logs and start-up ----------------------------------------------------------------
def test_an_idle_worker_logs_an_outage_once_and_backs_off(
    store: JobStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    down = threading.Event()
    down.set()
    flaky = Flaky(store, {"claim"}, down.is_set)
    worker = make_worker(flaky, tmp_path, poll_s=0.001, max_poll_s=0.004)
    # the webhook sender polls the same database: it was the one logging every second
    hooks = Flaky(worker.webhooks.store, {"claim_due"}, down.is_set)  # type: ignore[arg-type]
    worker.webhooks.store, worker.webhooks.poll_s = hooks, 0.001  # type: ignore[assignment]
    with caplog.at_level(logging.INFO, logger="worker"):
        thread = start(worker)
        try:
            wait_for(lambda: flaky.calls.get("claim", 0) >= 8, "several failed polls")
            wait_for(lambda: hooks.calls.get("claim_due", 0) >= 8, "several failed deliveries")
            down.clear()
            wait_for(lambda: "reaches the store again" in caplog.text, "the store to come back")
            wait_for(lambda: hooks.calls["claim_due"] >= 20, "deliveries polled again")
        finally:
            worker.stop()
            thread.join(BOUND_S)
    lines = [r for r in caplog.records if r.name.startswith("worker")]
    assert [r.getMessage().split(" (")[0].split(" after")[0] for r in lines] == [
        "worker w1 cannot reach the store",
        "worker w1 reaches the store again",
    ]
    assert all(r.exc_info is None and r.worker_id == "w1" for r in lines)  # type: ignore[attr-defined]


def test_outage_back_off_doubles_up_to_its_cap() -> None:
    outage = Outage("w", poll_s=1.0, max_poll_s=30.0)
    delays = [outage.failed(unreachable()) for _ in range(7)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    outage.reached()
    assert outage.failed(unreachable()) == 1.0


def test_a_worker_started_while_the_database_is_down_waits_for_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tries: list[int] = []

    def open_service() -> str:
        tries.append(1)
        if len(tries) < 4:
            raise unreachable()
        return "service"

    with caplog.at_level(logging.INFO, logger="worker"):
        assert open_when_reachable(open_service, poll_s=0.001, max_poll_s=0.002) == "service"
    assert len(tries) == 4 and "traceback" not in caplog.text.lower()
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    with pytest.raises(ValueError):  # not an outage: raised at once
        open_when_reachable(lambda: (_ for _ in ()).throw(ValueError("bad config")))


# -- graceful stop ---------------------------------------------------------------------------
def test_a_job_that_ends_within_the_grace_period_is_recorded(
    store: JobStore, tmp_path: Path
) -> None:
    job_id = store.submit("toy", "m", SPEC)[1]
    worker = make_worker(store, tmp_path, grace_s=30)
    thread = start(worker)
    wait_for(worker.running.is_set, "the job to run")
    worker.stop()
    later = store.submit("toy", "later", SPEC)[1]
    time.sleep(0.05)  # several heartbeats: the grace (by the clock) is not over
    assert job_row(store, job_id).status == "running"
    worker.release.set()
    thread.join(BOUND_S)
    assert not thread.is_alive() and job_row(store, job_id).status == "done"
    assert worker.stats.handed_back == 0
    assert job_row(store, later).status == "queued"  # a stopped worker takes no new job


def test_after_the_grace_period_the_job_is_handed_back_uncharged(
    store: JobStore, clock: ManualClock, tmp_path: Path
) -> None:
    job_id = store.submit("toy", "m", SPEC)[1]
    worker = make_worker(store, tmp_path, grace_s=30)
    thread = start(worker)
    wait_for(worker.running.is_set, "the job to run")
    worker.stop()
    clock.advance(29)
    time.sleep(0.05)  # several heartbeats: none hands back before the grace is over
    assert job_row(store, job_id).status == "running"
    clock.advance(1)
    thread.join(BOUND_S)
    assert not thread.is_alive()
    assert worker.stopped_by == ["LeaseLost"]  # the run was stopped (and with it its runtime)
    job = job_row(store, job_id)
    assert (job.status, job.available_at, job.max_attempts - job.attempts) == (
        "queued",
        clock.now(),
        3,
    )
    assert outcomes(store, job_id) == ["handed_back"] and worker.stats.handed_back == 1


def test_a_second_signal_hands_the_job_back_at_once(store: JobStore, tmp_path: Path) -> None:
    job_id = store.submit("toy", "m", SPEC)[1]
    worker = make_worker(store, tmp_path, grace_s=3600)
    thread = start(worker)
    wait_for(worker.running.is_set, "the job to run")
    worker.stop()
    worker.stop(now=True)
    thread.join(BOUND_S)
    assert not thread.is_alive() and job_row(store, job_id).status == "queued"
    assert outcomes(store, job_id) == ["handed_back"]


# -- observability and the runtime's label ----------------------------------------------------------
def test_job_log_lines_carry_the_job_and_worker_ids_and_the_factory_gets_the_lease(
    store: JobStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    job_id = store.submit("toy", "m", SPEC)[1]
    seen: list[tuple[str, bool]] = []

    def factory(spec: Any, task: Any, blobs: Any, owner: str, *, lease: str) -> Any:
        seen.append((owner, store.lease_alive(lease)))
        raise RuntimeError("no engine")

    worker = Worker(
        store,
        LocalBlobStore(tmp_path / "blobs"),
        {"toy": object()},  # type: ignore[dict-item]
        worker_id="w1",
        runtime_factory=factory,
        heartbeat_s=0.01,
    )
    with caplog.at_level(logging.INFO, logger="worker"):
        worker.work(burst=True)
    assert seen == [("w1", True)]
    jobs = [r for r in caplog.records if job_id in r.getMessage()]
    assert len(jobs) >= 2
    assert all((r.job_id, r.worker_id) == (job_id, "w1") for r in jobs)  # type: ignore[attr-defined]


def test_an_api_only_server_reaps_dead_workers_sandboxes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed worker's sandbox waited for another worker to reap it; `serve --workers 0`
    (an API-only server) now runs the same lease-checked reaper."""
    from usecases.service import Service
    from worker.sandboxes import SandboxReaper

    passes = threading.Event()
    forced: list[bool] = []

    def reap(self: SandboxReaper, *, force: bool = False) -> int:
        forced.append(force)
        passes.set()
        return 0

    monkeypatch.setattr(SandboxReaper, "maybe_reap", reap)
    service = Service.open(tmp_path / "data")
    try:
        service.start_sandbox_reaper(every_s=0.01)
        reaper = service.threads[-1]
        assert passes.wait(BOUND_S) and forced[0] is True
    finally:
        service.close()
    assert not reaper.is_alive()  # it ends with the service
