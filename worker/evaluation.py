"""One evaluation job: build the model's runtime, run the pipeline, keep the predictions.

A backfill (a job whose spec holds a ``BackfillScope``) builds on the model's newest result
(store.backfill): the pipeline sends only the sets that result lacks at their current
version. An uploaded image that is no longer stored, or on a backfill an image that no
longer loads, fails the job as ``image_gone`` (the worker then marks the model's row)."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from configs.schema import TaskSpec
from configs.vocabulary.jobs import BackfillScope, UnreadableSpec
from configs.vocabulary.results import EvaluationResult, Failure
from evaluator.errors import EvaluationError
from evaluator.pipeline import run_evaluation
from evaluator.profiling import GpuSampler
from evaluator.runtimes.specs import parse_runtime_spec
from store.backfill import CarriedResult, newest_result
from store.blobs import BlobStore
from store.jobs import ClaimedJob, JobStore
from worker.capabilities import only_devices
from worker.outage import describe
from worker.outcomes import (
    RuntimeFactory,
    failed,
    gone_on_backfill,
    image_gone,
    platform_failure,
)
from worker.predictions import store_predictions, stored_sets
from worker.progress import Progress

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobContext:
    """What a job needs of its worker."""

    store: JobStore
    blobs: BlobStore
    tasks: Mapping[str, TaskSpec]
    runtime_factory: RuntimeFactory
    worker_id: str
    config_dir: Path
    gpu_sampler: GpuSampler | None = None  # the machine's GPUs (NVML), where it has some
    gpu_devices: tuple[str, ...] = ()  # the GPUs that are this worker's alone


def evaluate_model(context: JobContext, job: ClaimedJob, progress: Progress) -> EvaluationResult:
    """The job's result, failed with a reason rather than raising for anything expected."""
    task = context.tasks.get(job.task)
    if task is None:
        return platform_failure(job.task, f"task {job.task!r} is not loaded")
    if isinstance(job.spec, UnreadableSpec):
        return platform_failure(job.task, job.spec.reason)
    try:
        spec = parse_runtime_spec(job.runtime)
    except ValueError as exc:  # a stored row no release of ours wrote: the platform's fault
        return platform_failure(job.task, f"the model's stored runtime is not valid: {exc}")
    gone = image_gone(spec, context.blobs)
    if gone is not None:
        return failed(job.task, gone)
    try:
        runtime = context.runtime_factory(
            spec, task, context.blobs, context.worker_id, lease=job.lease
        )
    except EvaluationError as exc:
        failure = Failure(exc.code, exc.message, exc.log_tail)
        if isinstance(job.spec, BackfillScope):
            failure = gone_on_backfill(failure)
        return failed(job.task, failure)
    except Exception as exc:
        log.exception(
            "could not build the runtime of job %s",
            job.id,
            extra={"job_id": job.id, "worker_id": context.worker_id},
        )
        return platform_failure(job.task, describe(exc))
    gpu_sampler = None
    if job.requirements.gpus:  # the submission asked for them; this worker has them
        devices = context.gpu_devices[: job.requirements.gpus]
        runtime.grant_gpus(devices)
        if context.gpu_sampler is not None:
            gpu_sampler = only_devices(context.gpu_sampler, devices)
    # Per-example predictions are kept for paired comparisons (worker.predictions).
    with tempfile.TemporaryDirectory(prefix="dynaeval-predictions-") as folder:
        result = run_evaluation(
            task,
            runtime,
            context.blobs,
            config_dir=context.config_dir,
            progress=progress.update,
            save_predictions=Path(folder),
            carried=carried_base(context, job),
            gpu_sampler=gpu_sampler,
        )
        if result.failure is None and job.model_id:
            store_predictions(context.blobs, job.model_id, Path(folder))
    return result


def carried_base(context: JobContext, job: ClaimedJob) -> CarriedResult | None:
    """A backfill's base: the model's newest result and its stored predictions (None: a
    full run, also for a backfill of a model that has no result to build on)."""
    if not isinstance(job.spec, BackfillScope) or not job.model_id:
        return None
    base = newest_result(context.store.db, job.model_id)
    if base is None:
        return None
    return replace(base, predictions=stored_sets(context.blobs, job.model_id))
