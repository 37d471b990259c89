"""What a worker hands its evaluation and gets back: the runtime factory (given the claim's
lease token), and the failed results the worker makes itself."""

from __future__ import annotations

from typing import Protocol

from configs.schema import TaskSpec
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.results import EvaluationResult, Failure
from evaluator.runtimes.factory import make_runtime
from evaluator.runtimes.runtime import Runtime
from store.blobs import BlobStore


class RuntimeFactory(Protocol):
    """Builds the runtime of one claim; ``lease`` is the claim's token (runtimes label what
    they start with it, so any worker can tell a dead lease's leftovers)."""

    def __call__(
        self, spec: dict, task: TaskSpec, blobs: BlobStore, owner: str, *, lease: str
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
    spec: dict, task: TaskSpec, blobs: BlobStore, owner: str, *, lease: str
) -> Runtime:
    return make_runtime(spec, task.limits, blobs, owner=owner, lease=lease)
