"""The conditions a model's speed and memory were measured under, and their fingerprint.

Stored with every result: the CPU model (``/proc/cpuinfo``), the host's CPU count, the
runtime, the model's cpuset and CPU limit, its memory limit, the evaluator's cpuset, the
engine and cgroup version (from the runtime) and the tool's version (``provenance``).

The *fingerprint* hashes only what makes two results' throughput and memory comparable:
the CPU model, the CPUs the model could use (its limit within its cpuset) and whether it
had them to itself, the memory limit, the runtime kind (process-tree RSS and cgroup
memory are different measures), the engine's major.minor and the cgroup version (which
memory the cgroup counts), and the profiling method's version. Not the exact CPU numbers
(core 1 and core 3 of one machine are alike), nor the tool's full version: a release that
leaves the measurement alone must not split a leaderboard, and one that changes it bumps
:data:`METHOD`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evaluator.provenance import code_version
from evaluator.runtimes.runtime import Runtime, RuntimeConditions

log = logging.getLogger(__name__)
METHOD = "loadgen-1"  # bump whenever the profiling method changes what its figures mean
CPUINFO = Path("/proc/cpuinfo")
# /proc/cpuinfo names the model differently per architecture: x86, then Arm, POWER, MIPS.
_MODEL_KEYS = ("model name", "Model", "Hardware", "cpu model", "cpu")
GIB = 1024**3


@dataclass(frozen=True)
class Conditions:
    """Everything recorded about one measurement; ``fingerprint`` is the comparable part."""

    cpu_model: str | None
    host_cpus: int
    runtime: str
    cpuset: str | None
    cpu_limit: float | None
    memory_limit_bytes: int | None
    evaluator_cpuset: str | None
    engine: str | None
    cgroup_version: str | None
    tool_version: str
    method: str = METHOD

    def model_cpus(self) -> float | None:
        """The CPUs the model could use: its limit, within its cpuset."""
        size = cpuset_size(self.cpuset) if self.cpuset else None
        bounds = [b for b in (self.cpu_limit, size) if b is not None]
        return float(min(bounds)) if bounds else None

    def comparable(self) -> dict[str, Any]:
        """The fields two results must share for their speed and memory to compare."""
        limit = self.memory_limit_bytes
        return {
            "cpu_model": self.cpu_model,
            "model_cpus": self.model_cpus(),
            "own_cpus": self.evaluator_cpuset is not None,
            "memory_limit_gib": round(limit / GIB, 3) if limit else None,
            "runtime": self.runtime,
            "engine": _major_minor(self.engine),
            "cgroup_version": self.cgroup_version,
            "method": self.method,
        }

    def fingerprint(self) -> str:
        """12 hex digits of the sha256 of the comparable fields."""
        return fingerprint_of(self.comparable())

    def label(self) -> str:
        """The comparable fields in one line, for people."""
        return label_of(self.comparable())

    def to_dict(self) -> dict[str, Any]:
        """Everything, plus the comparable part, its fingerprint and label (JSON-ready)."""
        return {
            **asdict(self),
            "comparable": self.comparable(),
            "fingerprint": self.fingerprint(),
            "label": self.label(),
        }


def fingerprint_of(comparable: dict[str, Any]) -> str:
    """The fingerprint of a comparable mapping (canonical JSON, sha256, 12 hex digits)."""
    text = json.dumps(comparable, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def label_of(comparable: dict[str, Any]) -> str:
    """``CPU model · N CPUs (own|shared) · M GiB · runtime engine, cgroup vX · method``."""
    cpus = comparable.get("model_cpus")
    share = "own" if comparable.get("own_cpus") else "shared with the evaluator"
    memory = comparable.get("memory_limit_gib")
    parts = [
        comparable.get("cpu_model") or "unknown CPU",
        f"{cpus:g} CPU{'' if cpus == 1 else 's'} ({share})" if cpus is not None else "CPUs unknown",
        f"{memory:g} GiB limit" if memory is not None else "no memory limit",
        " ".join(str(p) for p in (comparable.get("runtime"), comparable.get("engine")) if p),
    ]
    if comparable.get("cgroup_version"):
        parts.append(f"cgroup v{comparable['cgroup_version']}")
    parts.append(f"method {comparable.get('method')}")
    return " · ".join(parts)


def cpuset_size(text: str) -> int:
    """How many CPUs a kernel list (``0-3,6``) names."""
    total = 0
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        total += int(last or first) - int(first) + 1
    return total


def cpu_model_of(cpuinfo: str) -> str | None:
    """The first CPU's model name in ``/proc/cpuinfo`` text (None when it names none)."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields and value.strip():
            fields[key.strip()] = " ".join(value.split())
    return next((fields[key] for key in _MODEL_KEYS if key in fields), None)


def read_cpu_model(path: Path = CPUINFO) -> str | None:
    """The CPU model of this machine (None where ``/proc/cpuinfo`` cannot be read)."""
    try:
        return cpu_model_of(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def collect(runtime: Runtime, *, cpuinfo: Path = CPUINFO) -> Conditions:
    """The conditions of a measurement on ``runtime`` now; never raises (unknowns: None)."""
    try:
        own = runtime.conditions()
    except Exception:  # a measurement without conditions still stands: record unknowns
        log.exception("the %s runtime could not report its conditions", runtime.kind)
        own = RuntimeConditions()
    return Conditions(
        cpu_model=read_cpu_model(cpuinfo) if own.local else None,  # a URL's machine: unknown
        host_cpus=_host_cpus(),
        runtime=runtime.kind,
        cpuset=own.cpuset,
        cpu_limit=own.cpu_limit,
        memory_limit_bytes=own.memory_limit_bytes,
        evaluator_cpuset=own.evaluator_cpuset,
        engine=own.engine,
        cgroup_version=own.cgroup_version,
        tool_version=code_version(),
    )


def _host_cpus() -> int:
    return os.cpu_count() or 1


def _major_minor(engine: str | None) -> str | None:
    """``docker 20.10.24+dfsg1`` -> ``docker 20.10``: patch releases do not change timing."""
    if not engine:
        return None
    name, _, version = engine.rpartition(" ")
    numbers = version.split(".")
    short = ".".join(numbers[:2]) if len(numbers) >= 2 else version
    return f"{name} {short}".strip()
