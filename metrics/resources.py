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

import numpy as np

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
