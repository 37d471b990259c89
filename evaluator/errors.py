"""Failure codes: every way an evaluation can end badly has a code and a human sentence."""

from __future__ import annotations

from configs.vocabulary.failures import FailureCode


class EvaluationStopped(Exception):
    """The caller stopped the run from its progress callback (its worker lost the job or
    handed it back): not a fault, so it is logged as one line, and the caller records
    nothing for it."""


class EvaluationError(Exception):
    """An evaluation failed for a known reason; ``log_tail`` is the model's last log lines."""

    def __init__(self, code: FailureCode, message: str, log_tail: str = "") -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
        self.log_tail = log_tail

    def with_log(self, log_tail: str) -> EvaluationError:
        """The same error carrying the runtime's log tail."""
        return EvaluationError(self.code, self.message, log_tail)


# Failures that may be the model's exit seen from outside: the runtime is asked why it
# stopped, and its reason (an exit code, OOM) replaces the symptom.
EXIT_SYMPTOMS = frozenset(
    {
        FailureCode.CRASHED,
        FailureCode.REQUEST_TIMEOUT,
        FailureCode.BAD_STATUS,
        FailureCode.NEVER_HEALTHY,
    }
)
