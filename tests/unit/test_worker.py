"""The worker loop on a real SQLite store: burst mode, failures, lost workers, progress,
and one end-to-end run of a real example model (process runtime) on the sentiment task.

The store and its workers share a ManualClock: leases expire and back-offs pass when a test
advances it. Real time only bounds waits for other threads (never a speed assertion)."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from configs.paths import CONFIG_DIR
from configs.schema import TaskSpec
from configs.vocabulary.clock import ManualClock
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import JobStatus, RetryPolicy
from evaluator.errors import EvaluationError
from evaluator.runtimes.runtime import Runtime
from evaluator.runtimes.specs import ProcessSpec, RuntimeSpec
from evaluator.tasks import load_tasks
from evaluator.transport.endpoint import Endpoint
from store.blobs import BlobStore, LocalBlobStore
from store.db import Database
from store.jobs import JobStore
from store.models import AttemptRow, JobRow, ScoreRow
from store.queries import Queries
from worker.worker import RuntimeFactory, Worker

FAKE = {"kind": "process", "command": ["fake"], "protocol": "v1"}
BOUND_S = 60.0  # upper bound on any wait in this file (never a speed assertion)


# -- a deterministic in-process model --------------------------------------------------------
class FakeModel:
    """Protocol v1 over loopback: answers ``label`` for every instance; ``gate`` (if set)
    holds every /predict until the test opens it; ``crash`` answers 500."""

    def __init__(
        self, label: str = "positive", gate: threading.Event | None = None, crash: bool = False
    ) -> None:
        self.label, self.gate, self.crash = label, gate, crash
        self.batches = 0

    def handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"status": "ok"})

            def do_POST(self) -> None:
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model.batches += 1
                if model.gate is not None:
                    model.gate.wait(BOUND_S)
                if model.crash:
                    self._send(500, {"error": "boom"})
                    return
                self._send(
                    200,
                    {
                        "predictions": [
                            {"uid": i["uid"], "label": model.label} for i in payload["instances"]
                        ]
                    },
                )

        return Handler


class FakeRuntime(Runtime):
    """Starts a FakeModel on 127.0.0.1 in a thread; ``stop`` shuts it down."""

    kind = "fake"

    def __init__(self, model: FakeModel) -> None:
        self.model = model
        self.server: ThreadingHTTPServer | None = None
        self.stopped = False

    def start(self) -> Endpoint:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.model.handler())
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return Endpoint("127.0.0.1", self.server.server_address[1])

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        self.stopped = True


def factory_of(
    make_model: Callable[[Any], FakeModel], runtimes: list[FakeRuntime]
) -> RuntimeFactory:
    def factory(
        spec: RuntimeSpec, task: TaskSpec, blobs: BlobStore, owner: str, *, lease: str
    ) -> Runtime:
        runtime = FakeRuntime(make_model(spec))
        runtimes.append(runtime)
        return runtime

    return factory


# -- fixtures --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_tasks() -> dict[str, TaskSpec]:
    return load_tasks(CONFIG_DIR / "tasks")


@pytest.fixture(scope="module")
def small_task(real_tasks: dict[str, TaskSpec]) -> TaskSpec:
    """The real sentiment task cut to one round, no perturbations, a short profile."""
    task = real_tasks["sentiment"]
    return dataclasses.replace(
        task,
        rounds=task.rounds[:1],
        robustness=(),
        fairness=(),
        profiling=dataclasses.replace(task.profiling, warmup_batches=0, min_examples=8),
        bootstrap=dataclasses.replace(task.bootstrap, n_resamples=50),
    )


ONE_RUN = RetryPolicy(platform_budget=1)  # a platform fault ends the job at once


@dataclasses.dataclass
class Env:
    db: Database
    store: JobStore
    blobs: LocalBlobStore
    tasks: dict[str, TaskSpec]
    clock: ManualClock

    def worker(self, factory: RuntimeFactory | None = None, **options: Any) -> Worker:
        options.setdefault("heartbeat_s", 0.05)
        options.setdefault("poll_s", 0.05)
        return Worker(self.store, self.blobs, self.tasks, runtime_factory=factory, **options)

    def job(self, job_id: str) -> JobRow:
        with self.db.session() as session:
            return session.get(JobRow, job_id)

    def wait_out_back_off(self, job_id: str) -> None:
        """Move the clock to the moment the job's retry may start."""
        self.clock.advance((self.job(job_id).available_at - self.clock.now()).total_seconds())


@pytest.fixture
def env(tmp_path: Path, small_task: TaskSpec) -> Iterator[Env]:
    db = Database(f"sqlite:///{tmp_path / 'worker.sqlite3'}")
    clock = ManualClock()
    store = JobStore(db, clock)
    store.register_task("sentiment", 1, {})
    yield Env(db, store, LocalBlobStore(tmp_path / "blobs"), {"sentiment": small_task}, clock)
    db.dispose()


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


# -- burst mode ------------------------------------------------------------------------------
def test_burst_mode_drains_the_queue_and_returns(env: Env) -> None:
    runtimes: list[FakeRuntime] = []
    ids = [env.store.submit("sentiment", f"m{i}", FAKE)[1] for i in range(3)]
    stats = env.worker(factory_of(lambda spec: FakeModel(), runtimes)).work(burst=True)
    assert (stats.done, stats.failed, stats.requeued) == (3, 0, 0)
    assert all(env.job(job_id).status == JobStatus.DONE for job_id in ids)
    assert len(runtimes) == 3 and all(r.stopped for r in runtimes)
    with env.db.session() as session:
        assert session.scalars(select(ScoreRow.round).distinct()).all() == ["r1"]


def test_burst_mode_on_an_empty_queue_returns_at_once(env: Env) -> None:
    stats = env.worker(factory_of(lambda spec: FakeModel(), [])).work(burst=True)
    assert (stats.done, stats.failed, stats.requeued, stats.recovered) == (0, 0, 0, [])


def test_worker_continues_after_a_failing_job(env: Env) -> None:
    runtimes: list[FakeRuntime] = []

    def make(spec: RuntimeSpec) -> FakeModel:  # the fake model's label is its command's word
        assert isinstance(spec, ProcessSpec)
        return FakeModel(label=spec.command[1])

    bad = env.store.submit("sentiment", "bad", {**FAKE, "command": ["fake", "not-a-label"]})[1]
    good = env.store.submit("sentiment", "good", {**FAKE, "command": ["fake", "negative"]})[1]
    stats = env.worker(factory_of(make, runtimes)).work(burst=True)
    assert (stats.done, stats.failed) == (1, 1)
    failed = env.job(bad)
    assert failed.status == JobStatus.FAILED
    assert failed.failure_code == FailureCode.LABEL_OUTSIDE_SET
    assert "not-a-label" in failed.failure_message
    assert env.job(good).status == JobStatus.DONE
    assert all(r.stopped for r in runtimes)  # stopped on failure too


def test_model_error_reply_fails_the_job_with_a_code(env: Env) -> None:
    job_id = env.store.submit("sentiment", "crashy", FAKE)[1]
    stats = env.worker(factory_of(lambda spec: FakeModel(crash=True), [])).work(burst=True)
    assert stats.failed == 1
    job = env.job(job_id)
    assert job.status == JobStatus.FAILED and job.failure_code == FailureCode.BAD_STATUS


def test_runtime_factory_raising_ends_failed_with_a_reason(env: Env) -> None:
    def broken(spec: dict, task: TaskSpec, blobs: BlobStore, owner: str, *, lease: str) -> Runtime:
        raise RuntimeError("docker engine unreachable")

    job_id = env.store.submit("sentiment", "m", FAKE)[1]
    stats = env.worker(broken, retry_policy=ONE_RUN).work(burst=True)
    assert stats.failed == 1
    job = env.job(job_id)
    assert job.status == JobStatus.FAILED and job.failure_code == "platform_error"
    assert "docker engine unreachable" in job.failure_message


def test_platform_fault_in_the_factory_is_retried_not_stuck(env: Env) -> None:
    calls: list[int] = []

    def flaky(spec: dict, task: TaskSpec, blobs: BlobStore, owner: str, *, lease: str) -> Runtime:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("no space left on the worker")
        return FakeRuntime(FakeModel())

    job_id = env.store.submit("sentiment", "m", FAKE)[1]
    worker = env.worker(flaky)
    assert worker.work(burst=True).requeued == 1
    job = env.job(job_id)
    assert job.status == JobStatus.QUEUED and job.failure_code == "platform_error"
    assert job.available_at == env.clock.now() + timedelta(seconds=5)  # the worker's decision
    assert worker.work(burst=True).done == 0  # still backing off
    env.wait_out_back_off(job_id)
    assert worker.work(burst=True).done == 1
    assert env.job(job_id).status == JobStatus.DONE


def test_user_caused_factory_error_is_final(env: Env) -> None:
    def unloadable(
        spec: dict, task: TaskSpec, blobs: BlobStore, owner: str, *, lease: str
    ) -> Runtime:
        raise EvaluationError(FailureCode.IMAGE_NOT_LOADABLE, "not a docker save tarball", "tail")

    job_id = env.store.submit("sentiment", "m", FAKE)[1]
    assert env.worker(unloadable).work(burst=True).failed == 1
    job = env.job(job_id)
    assert (job.status, job.failure_code, job.log_tail) == ("failed", "image_not_loadable", "tail")


def test_job_of_an_unloaded_task_does_not_stay_running(env: Env) -> None:
    env.store.register_task("retired", 1, {})
    job_id = env.store.submit("retired", "m", FAKE)[1]
    env.worker(factory_of(lambda spec: FakeModel(), []), retry_policy=ONE_RUN).work(burst=True)
    job = env.job(job_id)
    assert job.status == JobStatus.FAILED and "not loaded" in job.failure_message


def test_unexpected_exception_in_evaluate_is_recorded(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*args: Any, **kwargs: Any) -> None:
        raise KeyError("bug in the pipeline")

    monkeypatch.setattr("worker.evaluation.run_evaluation", explode)
    job_id = env.store.submit("sentiment", "m", FAKE)[1]
    stats = env.worker(factory_of(lambda spec: FakeModel(), []), retry_policy=ONE_RUN).work(
        burst=True
    )
    assert stats.failed == 1
    job = env.job(job_id)
    assert job.status == JobStatus.FAILED and "bug in the pipeline" in job.failure_message


def test_result_the_store_refuses_fails_the_job_instead_of_killing_the_worker(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evaluator import pipeline

    real = pipeline.run_evaluation

    def duplicated(*args: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        result = real(*args, **kwargs)
        result.scores = result.scores + result.scores[:1]  # violates the unique score key
        return result

    monkeypatch.setattr("worker.evaluation.run_evaluation", duplicated)
    first = env.store.submit("sentiment", "dup", FAKE)[1]
    stats = env.worker(factory_of(lambda spec: FakeModel(), []), retry_policy=ONE_RUN).work(
        burst=True
    )
    assert stats.failed == 1
    job = env.job(first)
    assert job.status == JobStatus.FAILED and job.failure_code == "platform_error"
    assert "could not store the result" in job.failure_message
    with env.db.session() as session:
        assert session.scalars(select(ScoreRow)).all() == []


# -- lost workers ----------------------------------------------------------------------------
def test_job_of_a_killed_worker_is_requeued_and_completed(env: Env) -> None:
    job_id = env.store.submit("sentiment", "m", FAKE)[1]
    assert env.store.claim("killed-worker", lease_s=60).id == job_id  # never finishes
    worker = env.worker(factory_of(lambda spec: FakeModel(), []))
    assert worker.work(burst=True).recovered == []  # the lease still runs
    env.clock.advance(61)
    stats = worker.work(burst=True)
    assert stats.recovered == [job_id]
    job = env.job(job_id)
    assert job.status == JobStatus.QUEUED and job.failure_code == "worker_lost"
    assert job.available_at == env.clock.now() + timedelta(seconds=5)  # backs off like any retry
    env.wait_out_back_off(job_id)
    assert worker.work(burst=True).done == 1
    assert env.job(job_id).status == JobStatus.DONE
    with env.db.session() as session:
        history = session.scalars(
            select(AttemptRow).where(AttemptRow.job_id == job_id).order_by(AttemptRow.attempt)
        ).all()
    assert [(a.worker, a.outcome, a.failure_code) for a in history] == [
        ("killed-worker", "lost", "worker_lost"),
        (worker.worker_id, "done", None),
    ]


def test_running_loop_recovers_stalled_jobs_without_burst(env: Env) -> None:
    job_id = env.store.submit("sentiment", "m", FAKE)[1]
    env.store.claim("killed-worker", lease_s=60)
    worker = env.worker(factory_of(lambda spec: FakeModel(), []))
    thread = threading.Thread(target=worker.work, daemon=True)
    thread.start()
    try:
        env.clock.advance(61)  # the loop's next round finds the lease expired
        wait_for(lambda: env.job(job_id).status == JobStatus.QUEUED, "the requeue")
        env.wait_out_back_off(job_id)
        wait_for(lambda: env.job(job_id).status == JobStatus.DONE, "the rerun")
    finally:
        worker.stop()
        thread.join(BOUND_S)
    assert not thread.is_alive()


# -- progress --------------------------------------------------------------------------------
def test_progress_is_visible_in_the_store_while_running(env: Env) -> None:
    gate = threading.Event()
    model_id, job_id = env.store.submit("sentiment", "slow", FAKE)
    worker = env.worker(factory_of(lambda spec: FakeModel(gate=gate), []))
    thread = threading.Thread(target=worker.work, kwargs={"burst": True}, daemon=True)
    thread.start()
    queries = Queries(env.db)
    try:
        wait_for(lambda: "round r1" in env.job(job_id).stage, "a heartbeat with the stage")
        running = queries.submission(model_id)["job"]
        assert running["status"] == "running"
        assert 0.0 <= running["progress"] < 1.0
        assert "original" in running["stage"]
        assert env.job(job_id).lease_owner == worker.worker_id
    finally:
        gate.set()
        thread.join(BOUND_S)
    done = queries.submission(model_id)["job"]
    assert (done["status"], done["progress"], done["stage"]) == ("done", 1.0, "done")


# -- end to end with a real example model ----------------------------------------------------
@pytest.mark.slow
def test_end_to_end_real_example_model_scores_every_round(
    tmp_path: Path, real_tasks: dict[str, TaskSpec]
) -> None:
    from usecases.service import example_runtime

    db = Database(f"sqlite:///{tmp_path / 'e2e.sqlite3'}")
    store = JobStore(db)
    store.register_task("sentiment", 1, {})
    spec = example_runtime({"dir": "sentiment_lexicon", "task": "sentiment"}, "process")
    model_id, job_id = store.submit("sentiment", "sentiment-lexicon", spec)
    worker = Worker(
        store,
        LocalBlobStore(tmp_path / "blobs"),
        {"sentiment": real_tasks["sentiment"]},
        heartbeat_s=0.2,
    )
    stats = worker.work(burst=True)
    found = Queries(db).submission(model_id, with_scores=True)
    assert stats.done == 1, found["job"]["failure"]
    results = found["results"]
    assert [r["round"] for r in results["rounds"]] == ["r1", "r2", "r3"]
    for axis in ("performance", "throughput", "memory", "robustness", "fairness"):
        assert isinstance(results[axis], float), axis
    assert 0 < results["performance"] <= 100
    assert set(results["provenance"]["dataset_hashes"]) == {"r1/test", "r2/test", "r3/test"}
    scored = {(s["round"], s["variant"]) for s in found["scores"] if s["metric"] == "macro_f1"}
    for round_name in ("r1", "r2", "r3"):
        for variant in ("original", "typo", "paraphrase", "fairness"):
            assert (round_name, variant) in scored
    db.dispose()


def test_a_worker_that_lost_its_lease_stops_the_job_and_records_nothing(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """Another worker requeued and took the job (say this one stalled): this one must not
    go on evaluating (no profiling pass after the loss), nor overwrite the other's outcome;
    its model is still stopped."""
    gate = threading.Event()
    runtimes: list[FakeRuntime] = []
    _, job_id = env.store.submit("sentiment", "slow", FAKE)
    worker = env.worker(factory_of(lambda spec: FakeModel(gate=gate), runtimes))
    thread = threading.Thread(target=worker.work, kwargs={"burst": True}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: "round r1" in env.job(job_id).stage, "the job to run")
        with env.db.session() as session, session.begin():  # the other worker's claim
            taken = {"lease_owner": "other", "lease_token": "other-claim"}
            session.execute(update(JobRow).where(JobRow.id == job_id).values(**taken))
        # The worker flags the loss before it logs it, so once the line is there the run
        # stops at its next step whatever the threads' timing (the gate opens only now).
        wait_for(lambda: "lost the lease" in caplog.text, "the heartbeat to notice")
    finally:
        gate.set()
        thread.join(BOUND_S)
    assert not thread.is_alive()
    assert (worker.stats.done, worker.stats.failed, worker.stats.requeued) == (0, 0, 0)
    job = env.job(job_id)
    assert (job.status, job.lease_owner, job.failure_code) == ("running", "other", None)
    model = runtimes[0].model
    assert runtimes[0].stopped and model.batches <= 3  # round r1's 84 rows; no profiling pass


def test_a_stored_runtime_no_release_wrote_fails_as_the_platforms_fault(env: Env) -> None:
    """The worker reads a job's runtime as a typed spec before anything runs: a stored row
    that is not one (an unknown field) is retried as a platform error, never charged."""
    runtimes: list[FakeRuntime] = []
    job_id = env.store.submit("sentiment", "odd", {**FAKE, "secret": "x"})[1]
    stats = env.worker(factory_of(lambda spec: FakeModel(), runtimes)).work(burst=True)
    job = env.job(job_id)
    assert stats.done == 0 and runtimes == []
    assert job.failure_code == FailureCode.PLATFORM_ERROR
    assert "stored runtime is not valid" in job.failure_message
