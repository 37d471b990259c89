"""Measuring a model: a memory sampler thread and a separate, timed throughput pass.

Throughput comes from its own pass after an untimed warm-up, so start-up, dataset
loading and perturbation never count against the model. Memory is sampled from the
runtime (process tree RSS, or the container's cgroup) at a fixed interval.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence

from configs.vocabulary.examples import Example, Prediction
from evaluator.runtimes.runtime import Runtime
from metrics.resources import summarize_memory, summarize_throughput


class MemorySampler:
    """Samples ``runtime.sample_resources()`` every ``interval_s`` until stopped."""

    def __init__(self, runtime: Runtime, interval_s: float) -> None:
        self.runtime = runtime
        self.interval_s = interval_s
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)

    def start(self) -> MemorySampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            sample = self.runtime.sample_resources()
            if sample is not None:
                self.samples.append(sample.rss_bytes)
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def summary(self) -> dict[str, float | int] | None:
        """Average and peak GiB over the samples, or None where memory cannot be measured."""
        if not self.samples:
            return None
        return summarize_memory(self.samples).to_dict()


def profile_throughput(
    predict: Callable[[Sequence[Example]], list[Prediction]],
    examples: Sequence[Example],
    *,
    batch_size: int,
    warmup_batches: int,
    min_examples: int,
) -> dict[str, float | int]:
    """Untimed warm-up batches, then timed batches until ``min_examples`` have been answered."""
    source = itertools.cycle(examples)
    for _ in range(warmup_batches):
        predict([next(source) for _ in range(batch_size)])
    seconds: list[float] = []
    sizes: list[int] = []
    while sum(sizes) < min_examples or len(sizes) < 3:
        batch = [next(source) for _ in range(batch_size)]
        started = time.perf_counter()
        predict(batch)
        seconds.append(time.perf_counter() - started)
        sizes.append(len(batch))
    return summarize_throughput(seconds, sizes).to_dict()
