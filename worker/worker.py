"""The job loop: recover stalled jobs, claim one with a lease, heartbeat while evaluating,
store the outcome in one transaction, go on. Readable top to bottom, like rq's ``work()``.

The worker owns the job's lifecycle: it decides, with its RetryPolicy and its clock, whether a
failed attempt is retried and when; the store applies that decision under its lease check."""

from __future__ import annotations

import logging
import socket
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.exc import InterfaceError, OperationalError

from configs.paths import CONFIG_DIR
from configs.schema import TaskSpec
from configs.vocabulary.clock import Clock
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import DEFAULT_RETRY_POLICY, JobStatus, RetryPolicy
from configs.vocabulary.results import EvaluationResult, Failure
from evaluator.errors import EvaluationError
from evaluator.pipeline import run_evaluation
from evaluator.runtimes.factory import make_runtime
from evaluator.runtimes.runtime import Runtime
from store.blobs import BlobStore
from store.jobs import ClaimedJob, JobStore
from worker.lifecycle import settle_failure
from worker.lock import WorkerLock
from worker.predictions import store_predictions

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
        clock: Clock | None = None,
        retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    ) -> None:
        self.store = store
        # The store's clock unless told otherwise: retry times and leases must agree.
        self.clock = clock or store.clock
        self.retry_policy = retry_policy
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
        with WorkerLock(self.worker_id):
            self.clean_leftovers()
            self._loop(burst)
        return self.stats

    def _loop(self, burst: bool) -> None:
        while not self._stopping.is_set():
            try:
                self.stats.recovered += self.store.requeue_stalled(self.retry_policy)
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

    def perform(self, job: ClaimedJob) -> None:
        """Run one claimed job to a stored outcome, whatever happens inside."""
        progress = _Progress()
        beat = threading.Thread(target=self._heartbeat, args=(job, progress), daemon=True)
        beat.start()
        try:
            result = self.evaluate(job, progress)
        except Exception as exc:  # every job ends in a stored outcome, never stuck running
            log.exception("evaluating job %s failed on the platform side", job.id)
            result = platform_failure(job.task, _describe(exc))
        finally:
            progress.finished.set()
            beat.join(timeout=5)
        self.record(job, result)

    def evaluate(self, job: ClaimedJob, progress: _Progress) -> EvaluationResult:
        task = self.tasks.get(job.task)
        if task is None:
            return platform_failure(job.task, f"task {job.task!r} is not loaded")
        try:
            runtime = self.runtime_factory(job.runtime, task, self.blobs, self.worker_id)
        except EvaluationError as exc:
            return failed(job.task, Failure(exc.code, exc.message, exc.log_tail))
        except Exception as exc:
            log.exception("could not build the runtime of job %s", job.id)
            return platform_failure(job.task, _describe(exc))
        # Per-example predictions are kept for paired comparisons (worker.predictions).
        with tempfile.TemporaryDirectory(prefix="dynaeval-predictions-") as folder:
            result = run_evaluation(
                task,
                runtime,
                self.blobs,
                config_dir=self.config_dir,
                progress=progress.update,
                save_predictions=Path(folder),
            )
            if result.failure is None:
                store_predictions(self.blobs, job.model_id, Path(folder))
        return result

    def record(self, job: ClaimedJob, result: EvaluationResult) -> None:
        """Store the outcome. A result the store refuses fails the job as a platform fault; a
        store that cannot be reached is retried a few times, then the job is left to its
        lease: once it expires any worker requeues it. Nothing here ends the worker."""
        for attempt in range(_RECORD_ATTEMPTS):
            try:
                self._record_once(job, result)
                return
            except _ResultRefused as refused:
                result = platform_failure(job.task, refused.message)
            except Exception:
                log.exception("recording job %s failed (attempt %d)", job.id, attempt + 1)
                self._stopping.wait(min(30.0, 2.0**attempt))
        log.error("job %s left to its lease: the store could not record it", job.id)

    def _record_once(self, job: ClaimedJob, result: EvaluationResult) -> None:
        if result.failure is None:
            try:
                if self.store.finish(job.id, self.worker_id, result):
                    self.stats.done += 1
                return
            except Exception as exc:  # rolled back as a whole: record why instead
                if _is_unreachable(exc):
                    raise
                log.exception("the store refused the result of job %s", job.id)
                raise _ResultRefused(f"could not store the result: {_describe(exc)}") from exc
        self._fail(job, result.failure)

    def _fail(self, job: ClaimedJob, failure: Failure) -> None:
        """Settle a failed attempt (worker.lifecycle) and count how the job ended up."""
        status = settle_failure(
            self.store, job, self.worker_id, failure, policy=self.retry_policy, clock=self.clock
        )
        if status == JobStatus.QUEUED:
            self.stats.requeued += 1
        elif status == JobStatus.FAILED:
            self.stats.failed += 1
        log.info("job %s: %s (%s)", job.id, failure.code, failure.message)

    def _heartbeat(self, job: ClaimedJob, progress: _Progress) -> None:
        while not progress.finished.wait(self.heartbeat_s):
            fraction, stage = progress.snapshot()
            try:
                held = self.store.heartbeat(job.id, self.worker_id, self.lease_s, fraction, stage)
            except Exception:  # a missed beat is retried; the lease covers a few of them
                log.exception("heartbeat for job %s failed", job.id)
                continue
            if not held:  # requeued elsewhere: stop at the next step instead of finishing
                # Flag first, log second: whoever sees the log line may rely on the flag.
                progress.lost.set()
                log.warning("worker %s lost the lease of job %s", self.worker_id, job.id)
                return

    def clean_leftovers(self) -> None:
        """Remove containers and networks a previous run of this worker left behind, and pin
        the sandbox's guard image before any job can load an upload."""
        from evaluator.runtimes.docker.sandbox import cleanup_leftovers, pin_guard_image

        try:
            cleanup_leftovers(self.worker_id)
            pin_guard_image()
        except Exception as exc:  # no engine (or no base image): nothing of ours can run there
            log.debug("no docker preparation: %s", exc)


class LeaseLost(RuntimeError):
    """This worker no longer holds the job it is running."""


class _Progress:
    """Progress shared between the evaluation thread and the heartbeat thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fraction, self._stage = 0.0, "starting"
        self.finished = threading.Event()
        self.lost = threading.Event()

    def update(self, fraction: float, stage: str) -> None:
        """Called by the evaluation at every step; ends it once the lease is lost (the
        runtime is still stopped: the pipeline stops it whatever ends the run)."""
        if self.lost.is_set():
            raise LeaseLost("the job's lease was lost; another worker has it now")
        with self._lock:
            self._fraction, self._stage = fraction, stage

    def snapshot(self) -> tuple[float, str]:
        with self._lock:
            return self._fraction, self._stage


_RECORD_ATTEMPTS = 5


class _ResultRefused(Exception):
    """The store rejected a result (e.g. a constraint): the job fails as a platform fault."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message[:2000]


def _is_unreachable(exc: Exception) -> bool:
    """A database that is down or busy (retry), as opposed to one refusing the data."""
    return isinstance(exc, OperationalError | InterfaceError)


def failed(task: str, failure: Failure) -> EvaluationResult:
    """The result of an evaluation that ended with ``failure``."""
    return EvaluationResult(task, "failed", failure=failure)


def platform_failure(task: str, message: str) -> EvaluationResult:
    """A failed result that is the platform's fault (retried, never counted against anyone)."""
    return failed(task, Failure(FailureCode.PLATFORM_ERROR, message))


def _describe(exc: BaseException) -> str:
    """An unexpected exception as a failure message: its type and its text."""
    return f"{type(exc).__name__}: {exc}"


def _default_factory(spec: dict, task: TaskSpec, blobs: BlobStore, owner: str) -> Runtime:
    return make_runtime(spec, task.limits, blobs, owner=owner)
