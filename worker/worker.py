"""The job loop: recover stalled jobs, claim one with a lease, heartbeat while evaluating,
store the outcome in one transaction, go on. Readable top to bottom, like rq's ``work()``.

The worker owns the job's lifecycle: it decides, with its RetryPolicy and its clock, whether a
failed attempt is retried and when; the store applies that decision under its lease check
(every claim has its own lease token, see store.jobs).

Faults it survives: a store outage (one warning, capped back-off, a finished result retried
for as long as the lease lasts), a dead predecessor with its id (its jobs are settled at once
on restart), dead workers elsewhere (stale leases are checked even while busy), and a stop
(the running job gets ``grace_s``, then goes back to the queue uncharged)."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from configs.paths import CONFIG_DIR
from configs.schema import TaskSpec
from configs.vocabulary.capabilities import Capabilities
from configs.vocabulary.clock import Clock
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import DEFAULT_RETRY_POLICY, JobKind, JobStatus, RetryPolicy
from configs.vocabulary.results import EvaluationResult, Failure
from evaluator.profiling import GpuSampler
from store.blobs import BlobStore
from store.jobs import ClaimedJob, JobStore
from store.presence import PRESENCE_EVERY_S, WorkerPresence
from store.retention import mark_image_gone
from store.sealing import Sealer
from store.webhooks import WebhookStore
from worker.adversary import run_adversary
from worker.capabilities import nvml_sampler
from worker.evaluation import JobContext, evaluate_model
from worker.lifecycle import settle_failure
from worker.lock import WorkerLock
from worker.outage import Outage, StoreHealth, describe, is_unreachable
from worker.outcomes import ResultRefused, RuntimeFactory, default_factory, platform_failure
from worker.progress import LeaseLost, Progress
from worker.sandboxes import SandboxReaper
from worker.webhooks import WebhookSender

# LeaseLost and RuntimeFactory are part of the worker's interface (runtimes, tests).
__all__ = ["LeaseLost", "RuntimeFactory", "Worker", "WorkerStats", "default_worker_id"]

log = logging.getLogger(__name__)
# While a finished result waits for the store, it is offered again at least this often: a
# store that comes back should see it before another worker re-claims the job.
RECORD_POLL_MAX_S = 2.0
# How long a live worker keeps a finished result through a store outage.
HOLD_RESULT_S = 3600.0


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
    handed_back: int = 0
    recovered: list[str] = field(default_factory=list)


class Worker:
    """Runs evaluation jobs from the store until stopped (or until the queue is empty)."""

    def __init__(
        self,
        store: JobStore,
        blobs: BlobStore,
        tasks: Mapping[str, TaskSpec],
        *,
        worker_id: str | None = None,
        lease_s: float = 60.0,
        heartbeat_s: float = 1.0,
        poll_s: float = 1.0,
        max_poll_s: float = 30.0,
        grace_s: float = 20.0,
        reap_every: int = 10,
        reap_limit: int = 50,
        config_dir: Path = CONFIG_DIR,
        runtime_factory: RuntimeFactory | None = None,
        clock: Clock | None = None,
        retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY,
        pause: Callable[[float], object] | None = None,
        sealer: Sealer | None = None,
        hold_result_s: float = HOLD_RESULT_S,
        capabilities: Capabilities | None = None,
        gpu_sampler: GpuSampler | None = None,
    ) -> None:
        """``grace_s``: how long (by ``clock``) a running job may go on after ``stop()``;
        ``reap_every``: heartbeats between checks for other workers' expired leases (at most
        ``reap_limit`` settled per check); ``max_poll_s``: the cap of the back-off while the
        store is unreachable; ``pause``: waits between attempts to record an outcome (tests
        pass one that advances a ManualClock); ``sealer``: opens webhook secrets (a service
        hands its own; the default's key is this worker's alone); ``hold_result_s``: how long
        a finished result is kept through a store outage (past the lease); ``capabilities``:
        what this worker offers (worker.capabilities.detect), so it claims the jobs whose
        requirements it meets (None: only the jobs that need nothing); ``gpu_sampler``: reads
        the GPUs for the profiles of jobs that asked for them (default: NVML's, when
        ``capabilities`` found GPUs)."""
        self.store = store
        # The store's clock unless told otherwise: retry times and leases must agree.
        self.clock = clock or store.clock
        self.retry_policy = retry_policy
        self.blobs = blobs
        self.tasks = tasks
        self.worker_id = worker_id or default_worker_id()
        self.lease_s, self.heartbeat_s, self.grace_s = lease_s, heartbeat_s, grace_s
        self.poll_s, self.max_poll_s = poll_s, max_poll_s
        self.hold_result_s = hold_result_s
        self.capabilities = capabilities
        if gpu_sampler is None and capabilities is not None and capabilities.gpus:
            gpu_sampler = nvml_sampler()
        self.gpu_sampler = gpu_sampler
        self.reap_every, self.reap_limit = max(1, reap_every), reap_limit
        self.config_dir = config_dir
        self.runtime_factory: RuntimeFactory = runtime_factory or default_factory
        self.stats = WorkerStats()
        self.domain = ""  # the lock folder's domain, once work() holds the lock
        self._pause = pause or threading.Event().wait
        self._presence = WorkerPresence(store.db, self.clock)
        self._seen_at: datetime | None = None
        # one view of the store for every path that calls it: an outage is logged once
        self.health = StoreHealth(self.worker_id)
        self._outage = Outage(self.worker_id, poll_s, max_poll_s, health=self.health)
        self._stopping, self._abandon = threading.Event(), threading.Event()
        self._stop_at: datetime | None = None
        self._current: Progress | None = None
        self._predecessor_settled = False
        self.sandboxes = SandboxReaper(store, self.clock, self.worker_id)
        # runs while work() does
        self.webhooks = WebhookSender(
            WebhookStore(store.db, sealer or Sealer.ephemeral(), self.clock), health=self.health
        )

    # -- stopping --------------------------------------------------------------------------
    def stop(self, now: bool = False) -> None:
        """Take no more jobs. The running job may finish within ``grace_s``; after that (or
        at once with ``now``, e.g. on a second signal) it is handed back to the queue without
        charging an attempt, and its run is stopped at its next step."""
        if self._stop_at is None:
            self._stop_at = self.clock.now()
        self._stopping.set()
        self.webhooks.stop(timeout=0)  # no new deliveries; one in flight ends by its timeout
        if now:
            self._abandon.set()
        current = self._current
        if current is not None:
            current.tick.set()  # let the heartbeat thread see it now, not at its next beat

    def abandon(self) -> None:
        """Hand the running job back at once and stop: ``stop(now=True)``."""
        self.stop(now=True)

    def _hand_back_due(self) -> bool:
        if self._abandon.is_set():
            return True
        stop_at = self._stop_at
        return stop_at is not None and self.clock.now() >= stop_at + timedelta(seconds=self.grace_s)

    # -- the loop --------------------------------------------------------------------------
    def work(self, *, burst: bool = False) -> WorkerStats:
        """The loop. ``burst`` drains the queue and returns (tests, one-shot runs)."""
        with WorkerLock(self.worker_id) as lock:
            self.domain = lock.domain
            self.clean_leftovers()
            self._present()
            if not burst:
                # A one-shot run sends once, at its end: a sender thread could claim a
                # delivery that the end's stop then hands back unsent (a race seen in CI).
                self.webhooks.start()
            try:
                self._loop(burst)
                if burst:  # a one-shot run sends what it caused before it returns
                    self.webhooks.flush()
            finally:
                self.webhooks.stop()
                self._present(gone=True)
        return self.stats

    def _present(self, *, gone: bool = False) -> None:
        """Tell the store this worker is alive (at most every PRESENCE_EVERY_S), or that it
        stopped cleanly; an unreachable store is the loop's to report."""
        now = self.clock.now()
        due = self._seen_at is None or now - self._seen_at >= timedelta(seconds=PRESENCE_EVERY_S)
        if not (gone or due):
            return
        try:
            if gone:
                self._presence.gone(self.worker_id)
            else:
                offers = self.capabilities.to_dict() if self.capabilities else None
                self._presence.seen(self.worker_id, capabilities=offers)
                self._seen_at = now
        except Exception as exc:
            log.debug("presence not recorded: %s", describe(exc), extra=self._context())

    def _loop(self, burst: bool) -> None:
        while not self._stopping.is_set():
            claimed_at = self.clock.now()
            try:
                job = self._next_job()
            except Exception as exc:  # a database outage must not end a long-running worker
                if burst:
                    raise
                self._stopping.wait(self._outage.failed(exc))
                continue
            self._outage.reached()
            self._present()
            if job is None:
                if burst:
                    break
                self.sandboxes.maybe_reap()
                self._stopping.wait(self.poll_s)
                continue
            log.info(
                "worker %s claimed job %s (%s, attempt %d of %d)",
                self.worker_id,
                job.id,
                job.task,
                job.attempt,
                job.max_attempts,
                extra=self._context(job.id),
            )
            self.perform(job, claimed_at=claimed_at)

    def _next_job(self) -> ClaimedJob | None:
        """Settle what a dead predecessor (same id, same lock domain) left running, recover
        expired leases, then claim."""
        self._settle_predecessor()
        stalled = self.store.requeue_stalled(self.retry_policy, limit=self.reap_limit)
        self._note_recovered(stalled, "its lease expired")
        return self.store.claim(
            self.worker_id,
            self.lease_s,
            domain=self.domain or None,
            capabilities=self.capabilities,
        )

    def _settle_predecessor(self) -> None:
        """Requeue what a dead predecessor (same id, same lock domain: the lock proves it
        dead) left running; once per run, when the store answers."""
        if not self._predecessor_settled and self.domain:
            settled = self.store.settle_predecessor(self.worker_id, self.domain, self.retry_policy)
            self._note_recovered(settled, "its previous run died")
        self._predecessor_settled = True

    def _note_recovered(self, job_ids: list[str], why: str) -> None:
        for job_id in job_ids:
            log.info("recovered job %s: %s", job_id, why, extra=self._context(job_id))
        self.stats.recovered += job_ids

    # -- one job ---------------------------------------------------------------------------
    def perform(self, job: ClaimedJob, *, claimed_at: datetime | None = None) -> None:
        """Run one claimed job to a stored outcome, whatever happens inside. The heartbeat
        thread runs until the outcome is recorded (the lease must outlive a slow store)."""
        progress = Progress(claimed_at or self.clock.now())
        self._current = progress
        beat = threading.Thread(target=self._heartbeat, args=(job, progress), daemon=True)
        beat.start()
        try:
            if self._stopping.is_set():  # stopped while claiming: give it back untouched
                self._hand_back(job, progress)
                return
            result = self._outcome(job, progress)
            if progress.handing_back.is_set():
                beat.join(timeout=self.lease_s)  # the heartbeat thread ends once it tried
                if progress.handed_back:  # back in the queue: this run's outcome is moot
                    return
            self.record(job, result, progress)
        finally:
            progress.end()
            beat.join(timeout=5)
            self._current = None

    def _outcome(self, job: ClaimedJob, progress: Progress) -> EvaluationResult:
        context = self._context(job.id)
        try:
            return self.evaluate(job, progress)
        except LeaseLost as exc:  # lost or handed back: the store will refuse this outcome
            log.info("job %s stopped: %s", job.id, exc, extra=context)
            return platform_failure(job.task, describe(exc))
        except Exception as exc:  # every job ends in a stored outcome, never stuck running
            log.exception("evaluating job %s failed on the platform side", job.id, extra=context)
            return platform_failure(job.task, describe(exc))
        finally:
            progress.recording.set()  # from here on a stop no longer hands the job back

    def evaluate(self, job: ClaimedJob, progress: Progress) -> EvaluationResult:
        """Run the claimed job's kind: a model (or a backfill of one, worker.evaluation), or
        an adversary run (worker.adversary)."""
        context = JobContext(
            self.store, self.blobs, self.tasks, self.runtime_factory, self.worker_id,
            self.config_dir, self.gpu_sampler,
            self.capabilities.gpu_devices if self.capabilities is not None else (),
        )  # fmt: skip
        if job.kind is JobKind.ADVERSARY:
            return run_adversary(context, job, progress)
        return evaluate_model(context, job, progress)

    # -- recording -------------------------------------------------------------------------
    def record(
        self, job: ClaimedJob, result: EvaluationResult, progress: Progress | None = None
    ) -> None:
        """Store the outcome exactly once. A result the store refuses fails the job as a
        platform fault. A store that cannot be reached is retried (back-off capped at a few
        seconds) while the heartbeat thread renews the lease; a finished result is kept
        past the lease, for up to ``hold_result_s`` of outage, and recorded once the store
        answers if no newer attempt has started (``JobStore.finish_late``); a failure is
        left to its lease (the job is retried anyway). Nothing here ends the worker."""
        progress = progress or Progress(self.clock.now())
        context = self._context(job.id)
        outage = Outage(self.worker_id, 1.0, RECORD_POLL_MAX_S, job_id=job.id, health=self.health)
        waited, deadline = 0.0, progress.lease_deadline(self.lease_s)
        hold_s = self.hold_result_s if result.failure is None else self.lease_s
        while True:
            try:
                self._record_once(job, result)
                outage.reached()
                return
            except ResultRefused as refused:
                result = platform_failure(job.task, refused.message)
                hold_s = self.lease_s
                continue
            except Exception as exc:
                delay = outage.failed(exc)
            if progress.lease_deadline(self.lease_s) > deadline:  # a heartbeat renewed it
                waited, deadline = 0.0, progress.lease_deadline(self.lease_s)
            # The time waited since the last renewal bounds the retries even if the clock
            # stands still (tests).
            if self._abandon.is_set() or waited >= max(hold_s, self.lease_s):
                log.error(
                    "job %s left to its lease: the store could not record it in %.0f s",
                    job.id,
                    waited,
                    extra=context,
                )
                return
            waited += delay
            self._pause(delay)

    def _record_once(self, job: ClaimedJob, result: EvaluationResult) -> None:
        if result.failure is None:
            try:
                if self.store.finish(job.id, self.worker_id, result, lease=job.lease):
                    self.stats.done += 1
                    log.info("job %s done", job.id, extra=self._context(job.id))
                elif self.store.finish_late(job.id, job.attempt, job.lease, result):
                    self.stats.done += 1
                    log.info(
                        "job %s finished: its result was recorded after the store came back",
                        job.id,
                        extra=self._context(job.id),
                    )
                else:
                    log.warning(
                        "job %s: result dropped, a newer attempt holds the job",
                        job.id,
                        extra=self._context(job.id),
                    )
                return
            except Exception as exc:  # rolled back as a whole: record why instead
                if is_unreachable(exc):
                    raise
                log.exception(
                    "the store refused the result of job %s", job.id, extra=self._context(job.id)
                )
                raise ResultRefused(f"could not store the result: {describe(exc)}") from exc
        self._fail(job, result.failure)

    def _fail(self, job: ClaimedJob, failure: Failure) -> None:
        """Settle a failed attempt (worker.lifecycle) and count how the job ended up."""
        status = settle_failure(
            self.store, job, self.worker_id, failure, policy=self.retry_policy, clock=self.clock
        )
        if failure.code is FailureCode.IMAGE_GONE and job.model_id:  # the row says so
            mark_image_gone(self.store.db, job.model_id, failure.message, self.clock.now())
        if status == JobStatus.QUEUED:
            self.stats.requeued += 1
        elif status == JobStatus.FAILED:
            self.stats.failed += 1
        log.info(
            "job %s: %s (%s)", job.id, failure.code, failure.message, extra=self._context(job.id)
        )

    # -- the heartbeat thread ----------------------------------------------------------------
    def _heartbeat(self, job: ClaimedJob, progress: Progress) -> None:
        """Renew the lease every ``heartbeat_s``; hand the job back once a stop's grace is
        over; every ``reap_every`` beats, recover other workers' expired leases (so a dead
        worker's job waits for no idle worker)."""
        outage = Outage(self.worker_id, self.heartbeat_s, job_id=job.id, health=self.health)
        beats = 0
        while not progress.finished.is_set():
            progress.tick.wait(self.heartbeat_s)
            progress.tick.clear()
            if progress.finished.is_set():
                return
            if not progress.recording.is_set() and self._hand_back_due():
                self._hand_back(job, progress)
                return
            if not self._beat(job, progress, outage):
                return
            beats += 1
            if beats % self.reap_every == 0:
                self._reap()

    def _beat(self, job: ClaimedJob, progress: Progress, outage: Outage) -> bool:
        """One heartbeat; False once the lease is lost (the job must stop)."""
        fraction, stage = progress.snapshot()
        asked_at = self.clock.now()
        try:
            held = self.store.heartbeat(
                job.id, self.worker_id, self.lease_s, fraction, stage, lease=job.lease
            )
        except Exception as exc:  # a missed beat is retried; the lease covers several
            outage.failed(exc)
            return True
        outage.reached()
        if held:
            progress.renewed(asked_at)
            return True
        if not progress.finished.is_set():  # requeued elsewhere: stop at the next step
            # Flag first, log second: whoever sees the log line may rely on the flag.
            progress.lost.set()
            log.warning(
                "worker %s lost the lease of job %s",
                self.worker_id,
                job.id,
                extra=self._context(job.id),
            )
        return False

    def _reap(self) -> None:
        self.sandboxes.maybe_reap()
        try:
            stalled = self.store.requeue_stalled(self.retry_policy, limit=self.reap_limit)
        except Exception as exc:  # the next check tries again; the beat itself went through
            log.debug("checking for stalled jobs failed: %s", describe(exc), extra=self._context())
            return
        self._note_recovered(stalled, "its lease expired")

    def _hand_back(self, job: ClaimedJob, progress: Progress) -> None:
        """Give the job back to the queue (uncharged) and stop its run at the next step."""
        progress.handing_back.set()  # first: perform waits for the release, not records
        progress.lost.set()  # the run stops (and its runtime with it) at its next step
        context = self._context(job.id)
        try:
            released = self.store.release(job.id, job.lease)
        except Exception as exc:
            log.warning(
                "job %s could not be handed back (%s); its lease will expire",
                job.id,
                describe(exc),
                extra=context,
            )
            return
        if released:
            progress.handed_back = True
            self.stats.handed_back += 1
            log.info(
                "worker %s handed job %s back to the queue", self.worker_id, job.id, extra=context
            )

    # -- helpers ---------------------------------------------------------------------------
    def _context(self, job_id: str | None = None) -> dict[str, str]:
        """The structured-log fields of a record about this worker (and a job)."""
        if job_id is None:
            return {"worker_id": self.worker_id}
        return {"job_id": job_id, "worker_id": self.worker_id}

    def clean_leftovers(self) -> None:
        """Remove containers and networks a previous run of this worker left behind, and pin
        the sandbox's guard image before any job can load an upload."""
        from evaluator.runtimes.docker.sandbox import cleanup_leftovers, pin_guard_image

        try:  # before any job can load an upload, whatever happens below
            pin_guard_image()
        except Exception as exc:  # no engine (or no base image): nothing of ours can run there
            log.debug("no guard image: %s", exc, extra=self._context())
            return
        with contextlib.suppress(Exception):  # the store may be away: the loop retries
            # first, so the predecessor's leases are dead and its sandboxes go at once
            self._settle_predecessor()
        try:
            # only what no live lease holds: a same-named worker elsewhere may be running it
            cleanup_leftovers(
                self.worker_id, is_lease_alive=lambda lease: not self.store.lease_dead(lease)
            )
            self.sandboxes.maybe_reap(force=True)
        except Exception as exc:  # no engine (or no base image): nothing of ours can run there
            log.debug("no docker preparation: %s", exc, extra=self._context())
