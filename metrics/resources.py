"""Summaries of the profiling pass: throughput, latency and memory.

Latency is the wall time of one batch request, in milliseconds; its percentiles use
numpy's linear interpolation. Throughput is total examples over total batch time, so
idle time between batches and start-up are not counted. Memory is reported in GiB
(1024**3 bytes). Empty or invalid inputs raise ``ValueError``: a profile without samples
is a failed profile, never a zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

GIB = 1024**3


@dataclass(frozen=True)
class ThroughputSummary:
    """Throughput and per-batch latency percentiles of a profiling pass."""

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
class MemorySummary:
    """Average and peak memory of the sampled container, in GiB."""

    avg_gib: float
    peak_gib: float
    samples: int

    def to_dict(self) -> dict[str, float | int]:
        """JSON-ready mapping."""
        return asdict(self)


def summarize_throughput(
    batch_seconds: Sequence[float], batch_sizes: Sequence[int]
) -> ThroughputSummary:
    """Summarise timed batches: examples/s = sum(sizes) / sum(seconds)."""
    if len(batch_seconds) != len(batch_sizes):
        raise ValueError(
            f"{len(batch_seconds)} batch times but {len(batch_sizes)} batch sizes were given."
        )
    if len(batch_seconds) == 0:
        raise ValueError("no timed batches to summarise.")
    seconds = np.asarray(batch_seconds, dtype=float)
    sizes = np.asarray(batch_sizes)
    if not np.all(np.isfinite(seconds)) or np.any(seconds <= 0):
        raise ValueError("every batch time must be a positive, finite number of seconds.")
    if sizes.dtype.kind not in "iu" or np.any(sizes < 1):
        raise ValueError("every batch size must be a positive integer.")
    latency_ms = seconds * 1000.0
    p50, p90, p99 = np.percentile(latency_ms, [50, 90, 99])
    return ThroughputSummary(
        examples_per_s=float(sizes.sum() / seconds.sum()),
        latency_ms_p50=float(p50),
        latency_ms_p90=float(p90),
        latency_ms_p99=float(p99),
        batches=len(seconds),
        examples=int(sizes.sum()),
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
