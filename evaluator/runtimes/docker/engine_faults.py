"""Whose fault is a Docker error? The submission's (retrying cannot help, it counts against
the submitter) or the platform's (engine busy, registry down, address pool exhausted:
retried automatically, never counted against anyone)."""

from __future__ import annotations

from docker.errors import APIError, DockerException

from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError

# What a registry or engine says when the submission names something that is not there.
_MISSING = ("manifest unknown", "not found", "no such image", "repository does not exist")
# What the engine says when it could not reach a registry at all: DNS or the network. The
# worker's own resolver found the registry's name just before (references.check_pull_address),
# so these are the platform's, whatever status the engine wraps them in.
_UNREACHABLE = (
    "no such host",
    "server misbehaving",
    "name resolution",
    "dial tcp",
    "i/o timeout",
    "connection refused",
    "connection reset",
    "network is unreachable",
    "tls handshake timeout",
)


def is_platform_fault(exc: Exception) -> bool:
    """Connection failures and 5xx answers are the platform's; 4xx answers the caller's."""
    if not isinstance(exc, APIError) or exc.response is None:
        return isinstance(exc, DockerException | OSError)
    text = str(exc.explanation or exc).lower()
    status = exc.status_code or 0
    if any(phrase in text for phrase in _UNREACHABLE):
        return True
    if status == 404 or any(phrase in text for phrase in _MISSING):
        return False
    return status >= 500


def classify(exc: Exception, user_code: FailureCode, what: str) -> EvaluationError:
    """An EvaluationError for a Docker error: ``user_code`` or a platform error."""
    if is_platform_fault(exc):
        return EvaluationError(
            FailureCode.PLATFORM_ERROR, f"{what} failed on the worker's side (retried): {exc}"
        )
    return EvaluationError(user_code, f"{what} failed: {exc}")
