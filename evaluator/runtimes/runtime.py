"""The runtime interface: how the evaluator starts, talks to and stops one model.

Implementations (``process``, ``url``, ``docker``) are thin adapters. Reply validation
(count, order, uids, label set) does not live here but once, in ``evaluator.transport.client``.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from configs.schema import Limits
from configs.vocabulary.failures import FailureCode
from evaluator.transport.endpoint import Endpoint


class ExitReason(NamedTuple):
    """A runtime's own account of why its model died: a failure code and a sentence."""

    code: FailureCode
    sentence: str


@dataclass(frozen=True)
class ResourceSample:
    """Memory of the model's whole process tree / cgroup at one instant, in bytes."""

    rss_bytes: int


@dataclass
class RuntimeInfo:
    """Provenance of a run: image id/digest, command, limits actually applied."""

    kind: str
    details: dict[str, Any] = field(default_factory=dict)


class Runtime(abc.ABC):
    """Lifecycle of one model: ``start`` → ``endpoint`` → ``sample_resources`` … → ``stop``.

    ``stop`` must be safe to call more than once and after a failed ``start``.
    """

    kind: str = "abstract"

    @abc.abstractmethod
    def start(self) -> Endpoint:
        """Start the model and return where it listens (readiness is polled by the caller)."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop the model and release everything it held (containers, networks, processes)."""

    def alive(self) -> bool:
        """False once the model has exited (crash, OOM kill); used to explain failures."""
        return True

    def exit_reason(self) -> ExitReason | None:
        """(failure code value, sentence) explaining why the model died, if it did."""
        return None

    def sample_resources(self) -> ResourceSample | None:
        """Current memory use of the model, or None where it cannot be measured."""
        return None

    def logs_tail(self, max_bytes: int = 8192) -> str:
        """The last bytes of the model's combined stdout/stderr."""
        return ""

    def info(self) -> RuntimeInfo:
        """What was run, for provenance (recorded with every result)."""
        return RuntimeInfo(kind=self.kind)

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def limits_from_mapping(values: Mapping[str, Any] | None) -> Limits:
    """Limits from a config mapping; unknown keys are rejected by the config loader."""
    return Limits(**dict(values or {}))
