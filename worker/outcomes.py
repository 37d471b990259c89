"""What a worker hands its evaluation and gets back: the runtime factory (given the claim's
lease token), and the failed results the worker makes itself."""

from __future__ import annotations

from typing import Protocol

from configs.schema import TaskSpec
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.results import EvaluationResult, Failure
from evaluator.runtimes.factory import make_runtime
from evaluator.runtimes.runtime import Runtime
from evaluator.runtimes.specs import DockerSpec, RuntimeSpec
from store.blobs import BlobStore


class RuntimeFactory(Protocol):
    """Builds the runtime of one claim; ``lease`` is the claim's token (runtimes label what
    they start with it, so any worker can tell a dead lease's leftovers)."""

    def __call__(
        self, spec: RuntimeSpec, task: TaskSpec, blobs: BlobStore, owner: str, *, lease: str
    ) -> Runtime: ...


class ResultRefused(Exception):
    """The store rejected a result (e.g. a constraint): the job fails as a platform fault."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message[:2000]


def failed(task: str, failure: Failure) -> EvaluationResult:
    """The result of an evaluation that ended with ``failure``."""
    return EvaluationResult(task, "failed", failure=failure)


def platform_failure(task: str, message: str) -> EvaluationResult:
    """A failed result that is the platform's fault (retried, never counted against anyone)."""
    return failed(task, Failure(FailureCode.PLATFORM_ERROR, message))


def default_factory(
    spec: RuntimeSpec, task: TaskSpec, blobs: BlobStore, owner: str, *, lease: str
) -> Runtime:
    return make_runtime(spec, task.limits, blobs, owner=owner, lease=lease)


IMAGE_REMOVED = (
    "the model's uploaded image is no longer stored (removed under the image retention "
    "policy, or lost): it keeps its scores, and cannot be run on new data"
)


def image_gone(spec: RuntimeSpec, blobs: BlobStore) -> Failure | None:
    """IMAGE_GONE when the runtime's uploaded image is no longer in the blob store."""
    if isinstance(spec, DockerSpec) and spec.blob and not blobs.exists(spec.blob):
        return Failure(FailureCode.IMAGE_GONE, IMAGE_REMOVED)
    return None


def gone_on_backfill(failure: Failure) -> Failure:
    """On a backfill the image ran before: not loading it now means it is gone."""
    if failure.code is not FailureCode.IMAGE_NOT_LOADABLE:
        return failure
    message = f"the image that scored this model can no longer be loaded ({failure.message})"
    return Failure(FailureCode.IMAGE_GONE, message[:2000], failure.log_tail)
