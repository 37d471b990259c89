"""A worker survives its store: outcomes that cannot be written are retried, then left to
the lease; and one worker id runs in one live process per host."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from configs.vocabulary.clock import ManualClock
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.results import EvaluationResult, Failure
from store.blobs import LocalBlobStore
from store.db import Database
from store.jobs import JobStore
from store.models import JobRow
from worker.lock import WorkerIdInUse, WorkerLock
from worker.worker import Worker

SPEC = {"kind": "url", "url": "http://127.0.0.1:9", "protocol": "v1"}


@pytest.fixture
def lock_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DYNAEVAL_LOCK_DIR", str(tmp_path / "locks"))
    return tmp_path / "locks"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock) -> JobStore:
    db = Database(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    store = JobStore(db, clock)
    store.register_task("toy", 1, {})
    return store


class FlakyStore:
    """The real store, whose ``fail`` is unreachable for the first ``outages`` calls."""

    def __init__(self, store: JobStore, outages: int) -> None:
        self._store, self.outages, self.calls = store, outages, 0

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._store, name)

    def fail(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.calls <= self.outages:
            raise OperationalError("UPDATE jobs", {}, Exception("database is locked"))
        return self._store.fail(*args, **kwargs)


def failing_worker(store, tmp_path: Path) -> Worker:  # type: ignore[no-untyped-def]
    # No real back-off: the clock stands still, so the time waited bounds the retries.
    return Worker(
        store, LocalBlobStore(tmp_path / "blobs"), {}, worker_id="w1", pause=lambda seconds: None
    )


def crash_result() -> EvaluationResult:
    return EvaluationResult(
        "toy", "failed", failure=Failure(FailureCode.CRASHED, "exited with code 3")
    )


def test_an_unreachable_store_is_retried_until_the_outcome_is_recorded(
    store: JobStore, tmp_path: Path, lock_dir: Path
) -> None:
    model_id, _ = store.submit("toy", "m", SPEC)
    job = store.claim("w1", lease_s=60)
    flaky = FlakyStore(store, outages=2)
    worker = failing_worker(flaky, tmp_path)
    worker.record(job, crash_result())
    assert flaky.calls == 3 and worker.stats.failed == 1
    with store.db.session() as session:
        assert session.get(JobRow, job.id).status == "failed"


def test_a_store_that_stays_down_leaves_the_job_to_its_lease(
    store: JobStore, clock: ManualClock, tmp_path: Path, lock_dir: Path
) -> None:
    store.submit("toy", "m", SPEC)
    job = store.claim("w1", lease_s=60)
    flaky = FlakyStore(store, outages=10**6)
    worker = failing_worker(flaky, tmp_path)
    worker.record(job, crash_result())  # returns: the worker lives on
    assert worker.stats.failed == 0 and flaky.calls >= 2
    assert store.requeue_stalled(worker.retry_policy) == []  # the lease still runs
    clock.advance(61)
    assert store.requeue_stalled(worker.retry_policy) == [job.id]  # any worker recovers it


def test_one_worker_id_per_host(lock_dir: Path) -> None:
    with (
        WorkerLock("host-worker"),
        pytest.raises(WorkerIdInUse, match="another name"),
        WorkerLock("host-worker"),
    ):
        pass
    with WorkerLock("host-worker"):  # released when the first one ended
        pass
    with WorkerLock("host-worker"), WorkerLock("host-other"):
        pass


def test_a_second_worker_with_the_same_id_refuses_to_start(
    store: JobStore, tmp_path: Path, lock_dir: Path
) -> None:
    worker = Worker(store, LocalBlobStore(tmp_path / "blobs"), {}, worker_id="same")
    with WorkerLock("same"), pytest.raises(WorkerIdInUse):
        worker.work(burst=True)
    assert worker.work(burst=True).done == 0  # free again: starts, drains nothing, returns
