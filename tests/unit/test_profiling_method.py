"""The profiling method (MLPerf LoadGen style) on a fake clock: no wall-clock assertions.

A fake model answers every request by advancing a fake clock by a latency the test
chooses, so every throughput, percentile, count and duration is known by hand.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
import yaml

from configs.schema import ConfigError, ProfilingSpec, SpecValueError
from configs.vocabulary.examples import Example, Prediction
from evaluator.profiling import OFFLINE, SINGLE_STREAM, profile_throughput, timed_pass
from evaluator.scoring.rollup import measured_under, summarise
from evaluator.tasks import load_task
from metrics.resources import latency_percentiles_ms, spread

EXAMPLES = [Example(uid=f"u{i}", inputs={"text": f"t{i}"}, target="x") for i in range(10)]


class FakeModel:
    """A predict function that advances ``now`` by ``latency(size, call)`` per request
    (``call`` counts requests from 0) and keeps every request's size, in order."""

    def __init__(self, latency: Callable[[int, int], float]) -> None:
        self.now = 0.0
        self.latency = latency
        self.sizes: list[int] = []

    def clock(self) -> float:
        return self.now

    def __call__(self, batch: Sequence[Example]) -> list[Prediction]:
        self.now += self.latency(len(batch), len(self.sizes))
        self.sizes.append(len(batch))
        return [Prediction(uid=e.uid, output="x") for e in batch]


def spec(**changes: object) -> ProfilingSpec:
    base = ProfilingSpec(
        warmup_batches=0, min_examples=1, min_queries=1, min_duration_s=1e-6, repeats=1
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


# -- percentiles on synthetic timings ---------------------------------------------------------
def test_single_stream_percentiles_are_the_synthetic_latencies_percentiles() -> None:
    latencies = [0.010 * (i + 1) for i in range(100)]  # 10, 20, ..., 1000 ms in order
    # call 0 is the offline pass's one batch (min_examples 1); calls 1..100 are the queries
    model = FakeModel(lambda size, call: latencies[call - 1] if size == 1 else 0.5)
    profile = profile_throughput(
        model, EXAMPLES, batch_size=4, spec=spec(min_queries=100), clock=model.clock
    )
    run = profile["runs"][SINGLE_STREAM][0]
    assert run["requests"] == 100
    # numpy's linear interpolation over 10..1000 ms: p50 505, p90 901, p99 990.1
    assert run["latency_ms_p50"] == pytest.approx(505.0)
    assert run["latency_ms_p90"] == pytest.approx(901.0)
    assert run["latency_ms_p99"] == pytest.approx(990.1)
    assert profile["latency_ms_p99"] == pytest.approx(990.1)  # one repeat: its own value


def test_percentiles_by_hand_and_refusals() -> None:
    assert latency_percentiles_ms([0.5, 1.0, 0.5]) == pytest.approx(
        {"latency_ms_p50": 500.0, "latency_ms_p90": 900.0, "latency_ms_p99": 990.0}
    )
    for bad in ([], [0.0], [float("nan")], [-1.0]):
        with pytest.raises(ValueError):
            latency_percentiles_ms(bad)


def test_offline_throughput_is_examples_over_request_time() -> None:
    model = FakeModel(lambda size, call: 0.002 * size)  # 500 examples/s whatever the batch
    profile = profile_throughput(
        model, EXAMPLES, batch_size=8, spec=spec(min_examples=64), clock=model.clock
    )
    assert profile["mode"] == OFFLINE
    assert profile["examples_per_s"] == pytest.approx(500.0)
    assert profile["runs"][OFFLINE][0]["requests"] == 8  # 64 examples in batches of 8


# -- warm-up and stopping rules ---------------------------------------------------------------
def test_warm_up_is_sent_but_never_timed() -> None:
    # Warm-up requests take 100 s each; timed ones 10 ms per example.
    model = FakeModel(lambda size, call: 100.0 if call < 3 else 0.01 * size)
    profile = profile_throughput(
        model,
        EXAMPLES,
        batch_size=4,
        spec=spec(warmup_batches=3, min_examples=8, min_queries=2),
        clock=model.clock,
    )
    assert model.sizes[:3] == [4, 4, 4]  # the warm-up, at the task's batch size
    assert profile["warmup"] == {"requests": 3, "examples": 12}
    assert profile["examples_per_s"] == pytest.approx(100.0)  # no trace of the 100 s
    assert profile["latency_ms_p99"] == pytest.approx(10.0)
    assert profile["examples"] == 8 and profile["batches"] == 2


def test_a_pass_stops_at_its_minimum_count_when_that_comes_last() -> None:
    model = FakeModel(lambda size, call: 0.01)
    run = timed_pass(
        model, iter([[EXAMPLES[0]]] * 1000), mode=SINGLE_STREAM, min_count=50,
        count_examples=False, spec=spec(min_duration_s=0.1), clock=model.clock,
    )  # fmt: skip
    assert len(run.sizes) == 50  # 0.1 s was reached after 10; the count holds it to 50
    assert run.duration_s == pytest.approx(0.5) and run.met_minimums


def test_a_pass_stops_at_its_minimum_duration_when_that_comes_last() -> None:
    model = FakeModel(lambda size, call: 0.1)
    run = timed_pass(
        model, iter([[EXAMPLES[0]]] * 1000), mode=SINGLE_STREAM, min_count=3,
        count_examples=False, spec=spec(min_duration_s=2.0), clock=model.clock,
    )  # fmt: skip
    assert len(run.sizes) == 20  # 3 queries were done at 0.3 s; the duration holds it to 2 s
    assert run.duration_s == pytest.approx(2.0) and run.met_minimums


def test_an_offline_pass_counts_examples_not_requests() -> None:
    model = FakeModel(lambda size, call: 0.01)
    batches = iter([EXAMPLES[:4]] * 100)
    run = timed_pass(
        model, batches, mode=OFFLINE, min_count=10, count_examples=True,
        spec=spec(), clock=model.clock,
    )  # fmt: skip
    assert run.sizes == (4, 4, 4)  # 12 >= 10 examples


def test_a_pass_past_its_ceiling_stops_and_says_its_minimums_were_not_met() -> None:
    model = FakeModel(lambda size, call: 1.0)
    run = timed_pass(
        model, iter([[EXAMPLES[0]]] * 1000), mode=SINGLE_STREAM, min_count=500,
        count_examples=False, spec=spec(min_duration_s=1.0, max_duration_s=5.0),
        clock=model.clock,
    )  # fmt: skip
    assert len(run.sizes) == 5 and not run.met_minimums


# -- repeats, median and spread ---------------------------------------------------------------
def test_repeats_are_reported_as_median_and_spread() -> None:
    # Each repeat is one offline pass then one single-stream pass; repeat k runs at a
    # per-example cost of (1, 3, 2) ms, so offline rates are 1000, 333.3, 500 examples/s.
    cost = [0.001, 0.003, 0.002]
    calls_per_repeat = 2  # one offline request of 4 (min_examples 4) + one single query

    def latency(size: int, call: int) -> float:
        return cost[call // calls_per_repeat] * size

    model = FakeModel(latency)
    profile = profile_throughput(
        model, EXAMPLES, batch_size=4, spec=spec(min_examples=4, repeats=3), clock=model.clock
    )
    rates = [run["examples_per_s"] for run in profile["runs"][OFFLINE]]
    assert rates == pytest.approx([1000.0, 1000 / 3, 500.0])
    assert profile["examples_per_s"] == pytest.approx(500.0)  # the median
    rate = profile["examples_per_s_spread"]
    assert (rate["min"], rate["max"], rate["n"]) == pytest.approx((1000 / 3, 1000.0, 3))
    assert rate["cv"] == pytest.approx(np.std(rates, ddof=1) / np.mean(rates))
    assert profile["latency_ms_p50"] == pytest.approx(2.0)  # median of 1, 3, 2 ms
    assert profile["latency_ms_spread"]["latency_ms_p50"]["max"] == pytest.approx(3.0)
    assert profile["repeats"] == 3 and profile["met_minimums"]


def test_spread_of_one_repeat_has_no_variation() -> None:
    assert spread([5.0]).to_dict() == {"median": 5.0, "min": 5.0, "max": 5.0, "cv": 0.0, "n": 1}
    with pytest.raises(ValueError):
        spread([])


def test_a_model_taking_one_example_per_request_is_reported_as_single_stream() -> None:
    model = FakeModel(lambda size, call: 0.004 * size)
    profile = profile_throughput(
        model,
        EXAMPLES,
        batch_size=8,
        spec=spec(warmup_batches=2, min_queries=5, repeats=2),
        one_example_per_request=True,
        clock=model.clock,
    )
    assert profile["mode"] == SINGLE_STREAM
    assert profile["runs"][OFFLINE] == []  # no batched pass pretending to be one
    assert set(model.sizes) == {1}
    assert profile["examples_per_s"] == pytest.approx(250.0)
    assert profile["warmup"] == {"requests": 2, "examples": 2}


# -- the spec and the summary -----------------------------------------------------------------
def test_spec_defaults_and_field_rules() -> None:
    default = ProfilingSpec()
    assert (default.repeats, default.min_duration_s, default.min_queries) == (3, 0.5, 64)
    with pytest.raises(SpecValueError, match="max_duration_s"):
        ProfilingSpec(min_duration_s=10.0, max_duration_s=5.0)
    with pytest.raises(SpecValueError, match="repeats"):
        ProfilingSpec(repeats=0)


@pytest.mark.parametrize(
    "profiling, field",
    [({"min_queries": 0}, "profiling.min_queries"),
     ({"min_duration_s": 2.0, "max_duration_s": 1.0}, "profiling.max_duration_s"),
     ({"repeats": 0}, "profiling.repeats"),
     ({"min_duration_s": 0}, "profiling.min_duration_s")],
)  # fmt: skip
def test_the_loader_names_the_profiling_field(
    config_dir: Path, profiling: dict[str, object], field: str
) -> None:
    path = config_dir / "tasks" / "toy.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["profiling"] = {**raw["profiling"], **profiling}
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as caught:
        load_task(path, config_dir)
    assert caught.value.field == field


def test_the_summary_carries_the_mode_and_the_conditions(toy_task) -> None:  # type: ignore[no-untyped-def]
    conditions = {"fingerprint": "abc", "label": "L", "comparable": {"runtime": "docker"}}
    profile = {"throughput": {"examples_per_s": 5.0, "mode": SINGLE_STREAM}}
    summary, _ = summarise(toy_task, [], {**profile, "conditions": {**conditions, "x": 1}})
    assert summary["throughput"] == 5.0 and summary["throughput_mode"] == SINGLE_STREAM
    assert summary["conditions"] == conditions
    assert measured_under({}) is None  # older profiles: no conditions, not a crash
