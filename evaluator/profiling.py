"""Measuring a model: a memory sampler thread and the timed passes, after MLPerf LoadGen.

The method: untimed warm-up batches, then ``repeats`` times an *offline* pass (requests of
the task's batch size, back to back: examples/s) and a *single-stream* pass (one example
per request: latency percentiles). Each pass runs until it has lasted its minimum duration
and answered its minimum count. Each figure is reported as the median over the repeats
with its spread. Start-up, dataset loading and perturbation never count. A model that takes
one example per request cannot be batched: its throughput is the single-stream figure and
``mode`` says so. Time comes from an injectable ``clock`` (tests drive a fake one).

Memory is sampled from the runtime (process tree RSS, or the container's cgroup) at a fixed
interval. Where the runtime gives the model its own CPUs, the evaluator's measuring threads
(the sampler, and the caller during the timed passes) run on the others.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from configs.schema import ProfilingSpec
from configs.vocabulary.capabilities import GpuSample
from configs.vocabulary.examples import Example, Prediction
from evaluator.runtimes.runtime import Runtime
from metrics.resources import latency_percentiles_ms, spread, summarize_gpus, summarize_memory

log = logging.getLogger(__name__)
Clock = Callable[[], float]
Predict = Callable[[Sequence[Example]], list[Prediction]]
OFFLINE = "offline"
SINGLE_STREAM = "single_stream"
LATENCIES = ("latency_ms_p50", "latency_ms_p90", "latency_ms_p99")


GpuSampler = Callable[[], Sequence[GpuSample]]
"""Every GPU the model may use, sampled now (the worker's NVML reading)."""


class MemorySampler:
    """Samples ``runtime.sample_resources()`` (and the GPUs, with a ``gpu_sampler``) every
    ``interval_s`` until stopped."""

    def __init__(
        self, runtime: Runtime, interval_s: float, gpu_sampler: GpuSampler | None = None
    ) -> None:
        self.runtime = runtime
        self.interval_s = interval_s
        self.gpu_sampler = gpu_sampler
        self.samples: list[int] = []
        self.gpu_moments: list[Sequence[GpuSample]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)

    def start(self) -> MemorySampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        pin_thread(evaluator_cpus(self.runtime))  # its own thread: no need to restore
        while not self._stop.is_set():
            sample = self.runtime.sample_resources()
            if sample is not None:
                self.samples.append(sample.rss_bytes)
            if self.gpu_sampler is not None:
                self._sample_gpus(self.gpu_sampler)
            self._stop.wait(self.interval_s)

    def _sample_gpus(self, sampler: GpuSampler) -> None:
        try:
            self.gpu_moments.append(sampler())
        except Exception:  # a driver hiccup costs a sample, never the evaluation
            log.warning("sampling the GPUs failed", exc_info=True)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def summary(self) -> dict[str, float | int] | None:
        """Average and peak GiB over the samples, or None where memory cannot be measured."""
        if not self.samples:
            return None
        return summarize_memory(self.samples).to_dict()

    def gpu_summary(self) -> dict[str, Any] | None:
        """The GPUs' memory and utilisation over the samples (None: no GPU sampled)."""
        found = summarize_gpus(self.gpu_moments)
        return None if found is None else found.to_dict()


# -- CPU placement ----------------------------------------------------------------------------
def evaluator_cpus(runtime: Runtime) -> frozenset[int] | None:
    """The CPUs the evaluator's threads should use while ``runtime``'s model runs (None:
    anywhere). A runtime from elsewhere may not know the method: then anywhere."""
    method = getattr(runtime, "evaluator_cpus", None)
    return method() if callable(method) else None


def pin_thread(cpus: Collection[int] | None) -> bool:
    """Restrict the calling thread (on Linux ``sched_setaffinity(0)`` is per thread) to
    ``cpus``; False where that is not possible, which only costs measurement isolation."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return False
    try:
        os.sched_setaffinity(0, set(cpus))
    except OSError:  # CPUs outside our own cpuset (a worker in a container): leave it be
        return False
    return True


@contextlib.contextmanager
def pinned(cpus: Collection[int] | None) -> Iterator[None]:
    """The calling thread on ``cpus`` for the block, then back where it was (a worker
    thread goes on to other jobs)."""
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    changed = pin_thread(cpus)
    try:
        yield
    finally:
        if changed and before is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, before)


# -- the timed passes -------------------------------------------------------------------------
@dataclass(frozen=True)
class PassRun:
    """One timed pass: every request's time and size, the pass's wall duration, and whether
    it reached its minimum duration and count before ``max_duration_s`` cut it short."""

    mode: str
    request_seconds: tuple[float, ...]
    sizes: tuple[int, ...]
    duration_s: float
    met_minimums: bool

    @property
    def examples(self) -> int:
        return sum(self.sizes)

    def examples_per_s(self) -> float:
        """Examples over summed request time (idle time between requests not counted)."""
        return self.examples / sum(self.request_seconds)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: counts, duration, throughput and latency percentiles of this run."""
        return {
            "requests": len(self.sizes),
            "examples": self.examples,
            "duration_s": self.duration_s,
            "met_minimums": self.met_minimums,
            "examples_per_s": self.examples_per_s(),
            **latency_percentiles_ms(self.request_seconds),
        }


def timed_pass(
    predict: Predict,
    requests: Iterator[list[Example]],
    *,
    mode: str,
    min_count: int,
    count_examples: bool,
    spec: ProfilingSpec,
    clock: Clock,
) -> PassRun:
    """Send ``requests`` back to back until the pass has lasted ``spec.min_duration_s`` and
    answered ``min_count`` examples (``count_examples``) or requests, or until
    ``spec.max_duration_s`` has passed; at least one request is always timed."""
    seconds: list[float] = []
    sizes: list[int] = []
    count = 0  # kept as we go: a fast model answers thousands of requests per pass
    started = clock()
    while True:
        elapsed = clock() - started
        met = count >= min_count and elapsed >= spec.min_duration_s
        if seconds and (met or elapsed >= spec.max_duration_s):
            return PassRun(mode, tuple(seconds), tuple(sizes), elapsed, met)
        batch = next(requests)
        sent = clock()
        predict(batch)
        seconds.append(max(clock() - sent, 1e-9))  # a coarse clock may read 0 for one request
        sizes.append(len(batch))
        count += len(batch) if count_examples else 1


def _batches(examples: Sequence[Example], size: int) -> Iterator[list[Example]]:
    """Requests of ``size`` examples, cycling through ``examples`` forever."""
    source = itertools.cycle(examples)
    while True:
        yield [next(source) for _ in range(size)]


def profile_throughput(
    predict: Predict,
    examples: Sequence[Example],
    *,
    batch_size: int,
    spec: ProfilingSpec,
    one_example_per_request: bool = False,
    clock: Clock = time.perf_counter,
) -> dict[str, Any]:
    """Warm up (untimed), then ``spec.repeats`` offline and single-stream passes; the
    profile's ``throughput`` section (see :func:`fold`)."""
    if not examples:
        raise ValueError("profiling needs at least one example.")
    offline_batches = _batches(examples, 1 if one_example_per_request else batch_size)
    for _ in range(spec.warmup_batches):  # untimed: caches, lazy loading, JIT, connections
        predict(next(offline_batches))
    singles = _batches(examples, 1)
    offline: list[PassRun] = []
    single: list[PassRun] = []
    for _ in range(spec.repeats):
        if not one_example_per_request:  # unbatchable: its offline pass would be single-stream
            offline.append(_offline(predict, offline_batches, spec, clock))
        single.append(_single(predict, singles, spec, clock))
    warmup_size = 1 if one_example_per_request else batch_size
    return fold(offline, single, spec, batch_size, warmup_size * spec.warmup_batches)


def _offline(
    predict: Predict, batches: Iterator[list[Example]], spec: ProfilingSpec, clock: Clock
) -> PassRun:
    return timed_pass(
        predict, batches, mode=OFFLINE, min_count=spec.min_examples, count_examples=True,
        spec=spec, clock=clock,
    )  # fmt: skip


def _single(
    predict: Predict, singles: Iterator[list[Example]], spec: ProfilingSpec, clock: Clock
) -> PassRun:
    return timed_pass(
        predict, singles, mode=SINGLE_STREAM, min_count=spec.min_queries, count_examples=False,
        spec=spec, clock=clock,
    )  # fmt: skip


def fold(
    offline: Sequence[PassRun],
    single: Sequence[PassRun],
    spec: ProfilingSpec,
    batch_size: int,
    warmup_examples: int,
) -> dict[str, Any]:
    """The ``throughput`` section: headline figures (medians over repeats) under the keys
    other code reads, their spread, every run, and the method's settings. Throughput comes
    from the offline runs, or from the single-stream runs when there are none."""
    source = offline or single
    rate = spread([run.examples_per_s() for run in source])
    per_run = [run.to_dict() for run in single]
    latency = {key: spread([run[key] for run in per_run]) for key in LATENCIES}
    return {
        "mode": OFFLINE if offline else SINGLE_STREAM,
        "examples_per_s": rate.median,
        **{key: latency[key].median for key in LATENCIES},
        "examples_per_s_spread": rate.to_dict(),
        "latency_ms_spread": {key: value.to_dict() for key, value in latency.items()},
        "repeats": spec.repeats,
        "batches": sum(len(run.sizes) for run in source),  # timed throughput requests
        "examples": sum(run.examples for run in source),
        "met_minimums": all(run.met_minimums for run in (*offline, *single)),
        "warmup": {"requests": spec.warmup_batches, "examples": warmup_examples},
        "runs": {
            OFFLINE: [run.to_dict() for run in offline],
            SINGLE_STREAM: per_run,
        },
        "method": {**asdict(spec), "batch_size": batch_size},
    }
