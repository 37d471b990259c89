"""The runtime interface: how the evaluator starts, talks to and stops one model.

Implementations (``process``, ``url``, ``docker``) are thin adapters. Reply validation
(count, order, uids, label set) does not live here but once, in ``evaluator.transport.client``.
"""

from __future__ import annotations

import abc
import itertools
import math
from collections.abc import Collection, Mapping, Sequence
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


@dataclass(frozen=True)
class RuntimeConditions:
    """What a runtime knows of the conditions its model is measured under (None: not
    known or not applied): the model's cpuset and CPU limit, its memory limit, the
    evaluator's cpuset, the engine and the cgroup version. ``local``: the model runs on
    this machine (so this machine's CPU model is the model's); a model behind a URL may not."""

    local: bool = False
    cpuset: str | None = None
    cpu_limit: float | None = None
    memory_limit_bytes: int | None = None
    evaluator_cpuset: str | None = None
    engine: str | None = None
    cgroup_version: str | None = None


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

    def grant_gpus(self, devices: Sequence[str]) -> None:
        """Pass the GPUs ``devices`` names (indices or UUIDs) to the model when it starts (a
        job whose submission requires them). A process or URL model sees the host's devices
        as they are: nothing to do; a container runtime passes in those, and only those."""
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

    def evaluator_cpus(self) -> frozenset[int] | None:
        """CPUs the evaluator's measuring threads should keep to, apart from the model's
        (None: the model has no CPUs of its own, so anywhere)."""
        return None

    def conditions(self) -> RuntimeConditions:
        """The runtime's part of the measurement conditions (recorded with every result)."""
        return RuntimeConditions()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def limits_from_mapping(values: Mapping[str, Any] | None) -> Limits:
    """Limits from a config mapping; unknown keys are rejected by the config loader."""
    return Limits(**dict(values or {}))


def cpu_list(cpus: Collection[int]) -> str:
    """CPUs in the kernel's list format, e.g. ``0-3,6`` (cpuset files, ``docker --cpuset-cpus``)."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    for _, run in itertools.groupby(enumerate(ordered), lambda pair: pair[1] - pair[0]):
        members = [cpu for _, cpu in run]
        first, last = members[0], members[-1]
        parts.append(str(first) if first == last else f"{first}-{last}")
    return ",".join(parts)


def split_cpus(
    available: Collection[int], cpu_limit: float
) -> tuple[frozenset[int], frozenset[int]] | None:
    """(model's CPUs, evaluator's CPUs): the model gets the highest-numbered ⌈cpu_limit⌉
    CPUs, always leaving the evaluator at least one; None on one CPU, where a split would
    leave one side nothing."""
    ordered = sorted(set(available))
    if len(ordered) < 2:
        return None
    wanted = max(1, math.ceil(cpu_limit))
    model = ordered[-min(wanted, len(ordered) - 1) :]
    return frozenset(model), frozenset(ordered[: len(ordered) - len(model)])
