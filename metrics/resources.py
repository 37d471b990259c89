"""Summaries of the profiling passes: throughput, latency, their spread, and memory.

Latency is the wall time of one request, in milliseconds; its percentiles use numpy's
linear interpolation. A pass's throughput is its examples over the summed request time, so
idle time between requests and start-up are not counted. A profile repeated several times
is reported as the median over repeats with its spread (min, max and coefficient of
variation). Memory is reported in GiB (1024**3 bytes). Empty or invalid inputs raise
``ValueError``: a profile without samples is a failed profile, never a zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from configs.vocabulary.capabilities import GpuSample

GIB = 1024**3
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class ThroughputSummary:
    """Throughput and per-request latency percentiles of one timed pass."""

    examples_per_s: float
    latency_ms_p50: float
    latency_ms_p90: float
    latency_ms_p99: float
    batches: int
    examples: int

    def to_dict(self) -> dict[str, float | int]:
        """JSON-ready mapping."""
        return asdict(self)


@dataclass(frozen=True)
class Spread:
    """A figure measured once per repeat: its median, range and coefficient of variation
    (sample standard deviation over mean; 0 with one repeat)."""

    median: float
    min: float
    max: float
    cv: float
    n: int

    def to_dict(self) -> dict[str, float | int]:
        """JSON-ready mapping."""
        return asdict(self)


@dataclass(frozen=True)
class MemorySummary:
    """Average and peak memory of the sampled container, in GiB."""

    avg_gib: float
    peak_gib: float
    samples: int

    def to_dict(self) -> dict[str, float | int]:
        """JSON-ready mapping."""
        return asdict(self)


@dataclass(frozen=True)
class GpuSummary:
    """The model's GPUs over an evaluation: peak and average memory in use (GiB, summed
    over the devices at each moment), average utilisation (%, the devices' mean)."""

    devices: int
    models: tuple[str, ...]
    memory_total_gib: float
    peak_memory_gib: float
    avg_memory_gib: float
    avg_utilisation_percent: float
    samples: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping."""
        return asdict(self) | {"models": list(self.models)}


def summarize_gpus(moments: Sequence[Sequence[GpuSample]]) -> GpuSummary | None:
    """What ``moments`` (each: every device sampled once) say; None without a device."""
    moments = [moment for moment in moments if moment]
    if not moments:
        return None
    used = np.array([sum(s.memory_used_gib for s in moment) for moment in moments])
    busy = np.array([np.mean([s.utilisation_percent for s in moment]) for moment in moments])
    last = moments[-1]
    return GpuSummary(
        devices=len(last),
        models=tuple(sorted({s.name for s in last})),
        memory_total_gib=round(sum(s.memory_total_gib for s in last), 3),
        peak_memory_gib=round(float(used.max()), 3),
        avg_memory_gib=round(float(used.mean()), 3),
        avg_utilisation_percent=round(float(busy.mean()), 1),
        samples=len(moments),
    )


def latency_percentiles_ms(request_seconds: Sequence[float]) -> dict[str, float]:
    """``latency_ms_p50``/``p90``/``p99`` of request times given in seconds."""
    seconds = _positive_seconds(request_seconds)
    values = np.percentile(seconds * 1000.0, PERCENTILES)
    return {f"latency_ms_p{p}": float(v) for p, v in zip(PERCENTILES, values, strict=True)}


def summarize_throughput(
    batch_seconds: Sequence[float], batch_sizes: Sequence[int]
) -> ThroughputSummary:
    """Summarise timed requests: examples/s = sum(sizes) / sum(seconds)."""
    if len(batch_seconds) != len(batch_sizes):
        raise ValueError(
            f"{len(batch_seconds)} batch times but {len(batch_sizes)} batch sizes were given."
        )
    seconds = _positive_seconds(batch_seconds)
    sizes = np.asarray(batch_sizes)
    if sizes.dtype.kind not in "iu" or np.any(sizes < 1):
        raise ValueError("every batch size must be a positive integer.")
    latency = latency_percentiles_ms(batch_seconds)
    return ThroughputSummary(
        examples_per_s=float(sizes.sum() / seconds.sum()),
        latency_ms_p50=latency["latency_ms_p50"],
        latency_ms_p90=latency["latency_ms_p90"],
        latency_ms_p99=latency["latency_ms_p99"],
        batches=len(seconds),
        examples=int(sizes.sum()),
    )


def spread(values: Sequence[float]) -> Spread:
    """Median, range and coefficient of variation of one figure over repeats."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("no repeats to summarise.")
    if not np.all(np.isfinite(data)):
        raise ValueError("every repeat's value must be finite.")
    mean = float(data.mean())
    cv = float(data.std(ddof=1) / mean) if data.size > 1 and mean != 0 else 0.0
    return Spread(
        median=float(np.median(data)),
        min=float(data.min()),
        max=float(data.max()),
        cv=cv,
        n=int(data.size),
    )


def summarize_memory(samples_bytes: Sequence[int]) -> MemorySummary:
    """Average and peak of memory samples given in bytes, reported in GiB."""
    if len(samples_bytes) == 0:
        raise ValueError("no memory samples to summarise.")
    samples = np.asarray(samples_bytes, dtype=float)
    if not np.all(np.isfinite(samples)) or np.any(samples < 0):
        raise ValueError("memory samples must be non-negative, finite byte counts.")
    return MemorySummary(
        avg_gib=float(samples.mean() / GIB),
        peak_gib=float(samples.max() / GIB),
        samples=len(samples),
    )


def _positive_seconds(values: Sequence[float]) -> np.ndarray:
    """Request times as an array; at least one, each positive and finite."""
    if len(values) == 0:
        raise ValueError("no timed batches to summarise.")
    seconds = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(seconds)) or np.any(seconds <= 0):
        raise ValueError("every batch time must be a positive, finite number of seconds.")
    return seconds
