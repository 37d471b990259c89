"""What a worker can run and what a submission needs of it.

A worker advertises its ``Capabilities`` (CPUs, memory, GPUs and their model, labels an
operator gives it); a submission may state ``Requirements``; only a worker that meets them
claims the submission's jobs (store.claims). Pure: detecting a machine's capabilities is
the worker's (worker/capabilities.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

LABEL = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
MAX_LABELS = 16
KEYS = ("gpus", "cpus", "memory_gib", "gpu_model", "labels")


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one moment: memory in use and utilisation (read through NVML)."""

    index: int
    name: str
    memory_used_gib: float
    memory_total_gib: float
    utilisation_percent: float


class BadRequirements(ValueError):
    """Requirements that cannot be used (the sentence says why)."""


@dataclass(frozen=True)
class Capabilities:
    """What one worker offers its jobs. ``gpu_devices`` are the GPUs that are this worker's
    alone (as NVIDIA's container toolkit names them: an index or a ``GPU-…`` UUID): a job
    needing N gets the first N of them, so workers sharing a machine never share a GPU.
    Left empty, a worker with ``gpus`` has the machine's first ``gpus``."""

    cpus: int
    memory_gib: float
    gpus: int = 0
    gpu_model: str | None = None
    labels: frozenset[str] = field(default_factory=frozenset)
    gpu_devices: tuple[str, ...] = ()
    gpu_names: tuple[str, ...] = ()  # each device's model, in gpu_devices' order, if known

    def __post_init__(self) -> None:
        if not self.gpu_devices and self.gpus:
            object.__setattr__(self, "gpu_devices", tuple(str(i) for i in range(self.gpus)))
        if len(self.gpu_devices) != self.gpus:
            raise ValueError(f"{self.gpus} GPUs offered with devices {list(self.gpu_devices)}")
        if len(set(self.gpu_devices)) != len(self.gpu_devices):
            raise ValueError(f"a GPU is named twice: {list(self.gpu_devices)}")
        if self.gpu_names and len(self.gpu_names) != self.gpus:
            raise ValueError(f"{self.gpus} GPUs offered with models {list(self.gpu_names)}")

    def share(self, index: int, of: int) -> Capabilities:
        """What worker ``index`` of ``of`` on this machine offers: its own contiguous share
        of the GPUs (a worker may get none), the rest alike. Its GPU model is its own
        devices' (none when they differ, so no ``gpu_model`` requirement is met wrongly)."""
        start, stop = index * self.gpus // of, (index + 1) * self.gpus // of
        mine, names = self.gpu_devices[start:stop], self.gpu_names[start:stop]
        model = common_model(names) if names else (self.gpu_model if mine else None)
        return replace(self, gpus=len(mine), gpu_devices=mine, gpu_names=names, gpu_model=model)

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> Capabilities:
        """What ``to_dict`` wrote (a worker's presence row)."""
        return cls(
            cpus=int(stored["cpus"]),
            memory_gib=float(stored["memory_gib"]),
            gpus=int(stored.get("gpus", 0)),
            gpu_model=stored.get("gpu_model"),
            labels=frozenset(stored.get("labels", ())),
            gpu_devices=tuple(stored.get("gpu_devices", ())),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpus": self.cpus,
            "memory_gib": round(self.memory_gib, 2),
            "gpus": self.gpus,
            "gpu_model": self.gpu_model,
            "labels": sorted(self.labels),
            "gpu_devices": list(self.gpu_devices),
        }


def common_model(names: Sequence[str]) -> str | None:
    """The one model all of ``names`` are, or None (none given, or several)."""
    return names[0] if names and len(set(names)) == 1 else None


@dataclass(frozen=True)
class Requirements:
    """What a submission needs; the defaults need nothing."""

    gpus: int = 0
    cpus: int | None = None
    memory_gib: float | None = None
    gpu_model: str | None = None  # matched case-insensitively within the worker's
    labels: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> Requirements:
        """From a request's or a stored mapping; BadRequirements names what is wrong."""
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise BadRequirements("requirements must be an object")
        unknown = sorted(str(key) for key in set(raw) - set(KEYS))
        if unknown:
            raise BadRequirements(
                f"unknown requirement {unknown[0][:40]!r} (known: {', '.join(KEYS)})"
            )
        given = {key: value for key, value in raw.items() if value is not None}  # null: unset
        parsed = cls(
            gpus=_whole(given.get("gpus", 0), "gpus", 0, 16),
            cpus=None if "cpus" not in given else _whole(given["cpus"], "cpus", 1, 1024),
            memory_gib=_memory(given.get("memory_gib")),
            gpu_model=_gpu_model(given.get("gpu_model")),
            labels=_labels(given.get("labels", [])),
        )
        if parsed.gpu_model is not None and not parsed.gpus:
            raise BadRequirements("gpu_model needs gpus of at least 1")
        return parsed

    def to_dict(self) -> dict[str, Any]:
        """The set fields only (an empty mapping needs nothing)."""
        out: dict[str, Any] = {}
        if self.gpus:
            out["gpus"] = self.gpus
        if self.cpus is not None:
            out["cpus"] = self.cpus
        if self.memory_gib is not None:
            out["memory_gib"] = self.memory_gib
        if self.gpu_model is not None:
            out["gpu_model"] = self.gpu_model
        if self.labels:
            out["labels"] = sorted(self.labels)
        return out

    def met_by(self, worker: Capabilities) -> bool:
        """Whether ``worker`` may run a job with these requirements."""
        return (
            worker.gpus >= self.gpus
            and (self.cpus is None or worker.cpus >= self.cpus)
            and (self.memory_gib is None or worker.memory_gib >= self.memory_gib)
            and (self.gpu_model is None or _words(self.gpu_model) <= _words(worker.gpu_model))
            and self.labels <= worker.labels
        )


def _words(name: str | None) -> set[str]:
    """A GPU model's name as words: "A100" is in "NVIDIA A100-SXM4-40GB", not in "RTX A1000"."""
    return set(re.findall(r"[a-z0-9]+", (name or "").lower()))


def _whole(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadRequirements(f"{name} must be a whole number from {low} to {high}")
    return int(value)


def _memory(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.001 <= value <= 4096:
        raise BadRequirements("memory_gib must be a number from 0.001 to 4096")
    return float(value)


def _gpu_model(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value.strip()) <= 64 or not value.isprintable():
        raise BadRequirements("gpu_model must be a printable text of 1 to 64 characters")
    if not _words(value):
        raise BadRequirements("gpu_model must name the model in letters or digits")
    return value.strip()


def _labels(value: Any) -> frozenset[str]:
    if not isinstance(value, list) or len(value) > MAX_LABELS:
        raise BadRequirements(f"labels must be a list of at most {MAX_LABELS}")
    for label in value:
        if not isinstance(label, str) or not LABEL.fullmatch(label):
            raise BadRequirements(
                f"a label is 1-63 of a-z 0-9 . _ -, starting with a letter or digit: {label!r}"
            )
    return frozenset(value)
