"""The measurement lane's truth: a bare client's rate, measured once per server and shared
by the runtimes that serve it, and measured again for a measurement only it would let pass
(benchmarks/bench_fidelity.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks import bench_fidelity
from benchmarks.bench_fidelity import Case, throughput_window

NOMINAL = 62.5  # 16 ms an example


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Case]]:
    """The bare client replaced by one that records what it was asked to measure (each
    reading 1/s lower than the last); the shared truths forgotten before and after, so no
    made-up rate outlives the test."""
    asked: list[Case] = []

    def rate(case: Case, batch_size: int) -> float:
        asked.append(case)
        return 60.0 - len(asked) + batch_size / 32

    bench_fidelity._TRUTHS.clear()
    monkeypatch.setattr(bench_fidelity, "bare_client_rate", rate)
    yield asked
    bench_fidelity._TRUTHS.clear()


def test_the_runtimes_of_one_server_share_its_truth(measured: list[Case]) -> None:
    windows = [
        throughput_window(Case("stdlib", runtime, 300, 16.0), 32, NOMINAL)
        for runtime in ("process", "url", "docker")
    ]
    assert measured == [Case("stdlib", "url", 300, 16.0)]  # the bare client's own server
    assert {w.reachable for w in windows} == {60.0}
    assert {w.nominal for w in windows} == {NOMINAL}


def test_another_server_or_batch_is_measured_anew(measured: list[Case]) -> None:
    throughput_window(Case("flask", "process", 300, 16.0), 32, NOMINAL)
    throughput_window(Case("flask", "docker", 1024, 16.0), 32, NOMINAL)  # holds more memory
    throughput_window(Case("flask", "process", 300, 8.0), 32, 125.0)  # serves faster
    throughput_window(Case("flask", "process", 300, 16.0), 8, NOMINAL)  # smaller batches
    throughput_window(Case("fastapi", "process", 300, 16.0), 32, NOMINAL)
    assert len(measured) == 5


def test_a_measurement_only_a_shared_truth_lets_pass_is_judged_by_a_new_one(
    measured: list[Case],
) -> None:
    first = throughput_window(Case("stdlib", "process", 300, 16.0), 32, 59.0)
    assert measured and first.reachable == 60.0 and first.holds(59.0)  # its own truth
    within_band = throughput_window(Case("stdlib", "docker", 300, 16.0), 32, 61.0)
    assert len(measured) == 1 and within_band.holds(61.0)  # passes on the nominal alone
    low = throughput_window(Case("stdlib", "url", 300, 16.0), 32, 58.5)
    assert len(measured) == 2 and low.reachable == 59.0  # measured again: 59/s now
    assert not low.holds(58.5 * 0.95)
    assert throughput_window(Case("stdlib", "url", 300, 16.0), 32, NOMINAL).reachable == 59.0
