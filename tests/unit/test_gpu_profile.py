"""GPU memory and utilisation in a profile: sampled through NVML (recorded answers of a
machine with two A100s; this one has no GPU) beside the model's memory, for the jobs whose
submission required GPUs, and summarised: peak and average memory over the devices, their
mean utilisation."""

from __future__ import annotations

import functools
import time
from typing import Any

import pytest

from configs.vocabulary.capabilities import GpuSample, Requirements
from evaluator.profiling import MemorySampler
from evaluator.runtimes.runtime import Runtime
from metrics.resources import summarize_gpus
from store.queries import Queries
from tests.unit.test_capabilities import GPU_BOX, RecordedNvml
from tests.unit.test_worker import FAKE, Env, FakeModel, factory_of
from tests.unit.test_worker import env as env  # noqa: F401  (the worker test environment)
from tests.unit.test_worker import real_tasks as real_tasks  # noqa: F401
from tests.unit.test_worker import small_task as small_task  # noqa: F401
from worker.capabilities import gpu_samples


def gpu(index: int, used: float, busy: float) -> GpuSample:
    return GpuSample(index, "NVIDIA A100-SXM4-40GB", used, 40.0, busy)


@pytest.mark.parametrize(
    ("moments", "expected"),
    [
        ([], None),
        ([[]], None),
        (
            [[gpu(0, 2.0, 30.0)], [gpu(0, 6.0, 90.0)]],
            {"devices": 1, "peak_memory_gib": 6.0, "avg_memory_gib": 4.0,
             "avg_utilisation_percent": 60.0, "samples": 2, "memory_total_gib": 40.0},
        ),
        (
            [[gpu(0, 2.0, 37.0), gpu(1, 10.0, 91.0)], [gpu(0, 1.0, 0.0), gpu(1, 1.0, 0.0)]],
            {"devices": 2, "peak_memory_gib": 12.0, "avg_memory_gib": 7.0,
             "avg_utilisation_percent": 32.0, "samples": 2, "memory_total_gib": 80.0},
        ),
    ],
)  # fmt: skip
def test_gpu_moments_summarise(moments: list[list[GpuSample]], expected: Any) -> None:
    found = summarize_gpus(moments)
    if expected is None:
        assert found is None
        return
    assert found is not None
    assert {key: value for key, value in found.to_dict().items() if key in expected} == expected
    assert found.to_dict()["models"] == ["NVIDIA A100-SXM4-40GB"]


class Quiet(Runtime):
    kind = "quiet"

    def start(self) -> Any:
        raise NotImplementedError

    def stop(self) -> None:
        pass

    def alive(self) -> bool:
        return True


def test_a_failing_gpu_read_costs_a_sample_not_the_evaluation() -> None:
    calls = iter([RuntimeError("NVML: GPU is lost"), [gpu(0, 3.0, 50.0)]])

    def flaky() -> list[GpuSample]:
        answer = next(calls, [gpu(0, 3.0, 50.0)])
        if isinstance(answer, Exception):
            raise answer
        return answer

    sampler = MemorySampler(Quiet(), 0.005, flaky).start()
    try:
        deadline = time.monotonic() + 10
        while len(sampler.gpu_moments) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        sampler.stop()
    summary = sampler.gpu_summary()
    assert summary is not None and summary["peak_memory_gib"] == 3.0


@pytest.mark.slow  # two real evaluations: the full lane
def test_a_job_that_required_gpus_has_them_in_its_profile(env: Env) -> None:  # noqa: F811
    needs_one = env.store.submit("sentiment", "on-gpu", FAKE, requirements=_gpus(1))[0]
    needs_two = env.store.submit("sentiment", "on-gpus", FAKE, requirements=_gpus(2))[0]
    plain = env.store.submit("sentiment", "on-cpu", FAKE)[0]
    worker = env.worker(
        factory_of(lambda spec: FakeModel(), []),
        capabilities=GPU_BOX,
        gpu_sampler=functools.partial(gpu_samples, RecordedNvml()),
    )
    assert worker.work(burst=True).done == 3
    one = Queries(env.db).submission(needs_one)["results"]["profile"]["gpu"]
    # the job's own GPU only (the worker's first), not the machine's other one
    assert (one["devices"], one["peak_memory_gib"], one["avg_utilisation_percent"]) == (
        1, 2.0, 37.0
    )  # fmt: skip
    two = Queries(env.db).submission(needs_two)["results"]["profile"]["gpu"]
    assert two["devices"] == 2
    assert two["peak_memory_gib"] == 12.0  # 2 + 10 GiB of the recorded A100s
    assert two["avg_utilisation_percent"] == 64.0
    assert "gpu" not in Queries(env.db).submission(plain)["results"]["profile"]


def _gpus(count: int) -> Requirements:
    return Requirements.parse({"gpus": count})
