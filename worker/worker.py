"""The job loop: recover stalled jobs, claim one with a lease, heartbeat while evaluating,
store the outcome in one transaction, go on. Readable top to bottom, like rq's ``work()``."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from configs.loader import CONFIG_DIR
from configs.schema import TaskSpec
from evaluator.errors import EvaluationError
from evaluator.factory import make_runtime
from evaluator.pipeline import run_evaluation
from evaluator.results import EvaluationResult, Failure
from evaluator.runtime import Runtime
from store.blobs import BlobStore
from store.jobs import ClaimedJob, JobStore
from worker.job import JobStatus

log = logging.getLogger(__name__)


def default_worker_id(name: str = "worker") -> str:
    """``<host>-<name>``: stable across restarts, so a restarted worker finds and removes the
    containers its previous life left behind. Concurrent workers on one host need distinct
    names."""
    return f"{socket.gethostname()}-{name}"


@dataclass
class WorkerStats:
    """What a worker did (for burst mode and tests)."""

    done: int = 0
    failed: int = 0
    requeued: int = 0
    recovered: list[str] = field(default_factory=list)


class Worker:
    """Runs evaluation jobs from the store until stopped (or until the queue is empty)."""

    def __init__(
        self,
        store: JobStore,
        blobs: BlobStore,
        tasks: dict[str, TaskSpec],
        *,
        worker_id: str | None = None,
        lease_s: float = 60.0,
        heartbeat_s: float = 1.0,
        poll_s: float = 1.0,
        config_dir: Path = CONFIG_DIR,
        runtime_factory: Callable[[dict, TaskSpec, BlobStore, str], Runtime] | None = None,
    ) -> None:
        self.store = store
        self.blobs = blobs
        self.tasks = tasks
        self.worker_id = worker_id or default_worker_id()
        self.lease_s = lease_s
        self.heartbeat_s = heartbeat_s
        self.poll_s = poll_s
        self.config_dir = config_dir
        self.runtime_factory = runtime_factory or _default_factory
        self.stats = WorkerStats()
        self._stopping = threading.Event()

    def stop(self) -> None:
        """Finish the current job, then leave the loop."""
        self._stopping.set()

    def work(self, *, burst: bool = False) -> WorkerStats:
        """The loop. ``burst`` drains the queue and returns (tests, one-shot runs)."""
        self.clean_leftovers()
        while not self._stopping.is_set():
            try:
                self.stats.recovered += self.store.requeue_stalled()
                job = self.store.claim(self.worker_id, self.lease_s)
            except Exception:  # a database hiccup must not end a long-running worker
                if burst:
                    raise
                log.exception("worker %s could not reach the store; retrying", self.worker_id)
                self._stopping.wait(self.poll_s)
                continue
            if job is None:
                if burst:
                    break
                self._stopping.wait(self.poll_s)
                continue
            self.perform(job)
        return self.stats

    def perform(self, job: ClaimedJob) -> None:
        """Run one claimed job to a stored outcome, whatever happens inside."""
        progress = _Progress()
        beat = threading.Thread(target=self._heartbeat, args=(job, progress), daemon=True)
        beat.start()
        try:
            result = self.evaluate(job, progress)
        except Exception as exc:  # every job ends in a stored outcome, never stuck running
            log.exception("evaluating job %s failed on the platform side", job.id)
            failure = Failure("platform_error", f"{type(exc).__name__}: {exc}", "", False)
            result = EvaluationResult(job.task, "failed", failure=failure)
        finally:
            progress.finished.set()
            beat.join(timeout=5)
        self.record(job, result)

    def evaluate(self, job: ClaimedJob, progress: _Progress) -> EvaluationResult:
        task = self.tasks.get(job.task)
        if task is None:
            failure = Failure("platform_error", f"task {job.task!r} is not loaded", "", False)
            return EvaluationResult(job.task, "failed", failure=failure)
        try:
            runtime = self.runtime_factory(job.runtime, task, self.blobs, self.worker_id)
        except EvaluationError as exc:
            return EvaluationResult(job.task, "failed", failure=_failure_of(exc))
        except Exception as exc:
            log.exception("could not build the runtime of job %s", job.id)
            failure = Failure("platform_error", f"{type(exc).__name__}: {exc}", "", False)
            return EvaluationResult(job.task, "failed", failure=failure)
        return run_evaluation(
            task, runtime, self.blobs, config_dir=self.config_dir, progress=progress.update
        )

    def record(self, job: ClaimedJob, result: EvaluationResult) -> None:
        """Store the outcome; a result the store refuses fails the job as a platform fault."""
        if result.failure is None:
            try:
                if self.store.finish(job.id, self.worker_id, result):
                    self.stats.done += 1
                return
            except Exception as exc:  # rolled back as a whole: record why instead
                log.exception("could not store the result of job %s", job.id)
                message = f"could not store the result: {type(exc).__name__}: {exc}"
                result = EvaluationResult(
                    job.task, "failed", failure=Failure("platform_error", message[:2000], "", False)
                )
        assert result.failure is not None
        status = self.store.fail(job.id, self.worker_id, result.failure)
        if status == JobStatus.QUEUED:
            self.stats.requeued += 1
        elif status == JobStatus.FAILED:
            self.stats.failed += 1
        log.info("job %s: %s (%s)", job.id, result.failure.code, result.failure.message)

    def _heartbeat(self, job: ClaimedJob, progress: _Progress) -> None:
        while not progress.finished.wait(self.heartbeat_s):
            fraction, stage = progress.snapshot()
            try:
                self.store.heartbeat(job.id, self.worker_id, self.lease_s, fraction, stage)
            except Exception:  # a missed beat is retried; the lease covers a few of them
                log.exception("heartbeat for job %s failed", job.id)

    def clean_leftovers(self) -> None:
        """Remove containers and networks a previous run of this worker left behind."""
        try:
            from evaluator.docker_runtime import cleanup_leftovers
        except ImportError:
            return
        try:
            cleanup_leftovers(self.worker_id)
        except Exception as exc:  # no engine: nothing of ours can be left in it
            log.debug("no docker cleanup: %s", exc)


class _Progress:
    """Progress shared between the evaluation thread and the heartbeat thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fraction, self._stage = 0.0, "starting"
        self.finished = threading.Event()

    def update(self, fraction: float, stage: str) -> None:
        with self._lock:
            self._fraction, self._stage = fraction, stage

    def snapshot(self) -> tuple[float, str]:
        with self._lock:
            return self._fraction, self._stage


def _failure_of(exc: EvaluationError) -> Failure:
    return Failure(exc.code.value, exc.message, exc.log_tail, exc.code.user_caused)


def _default_factory(spec: dict, task: TaskSpec, blobs: BlobStore, owner: str) -> Runtime:
    return make_runtime(spec, task.limits, blobs, owner=owner)
