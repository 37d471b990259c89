"""The measurement lane's truth: a bare client's rate, measured once per server and shared
by the runtimes that serve it (benchmarks/bench_fidelity.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks import bench_fidelity
from benchmarks.bench_fidelity import Case, throughput_window


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Case]]:
    """The bare client replaced by one that records what it was asked to measure; the
    shared truths forgotten before and after, so no made-up rate outlives the test."""
    asked: list[Case] = []

    def rate(case: Case, batch_size: int) -> float:
        asked.append(case)
        return 50.0 + batch_size

    bench_fidelity._reachable_rate.cache_clear()
    monkeypatch.setattr(bench_fidelity, "bare_client_rate", rate)
    yield asked
    bench_fidelity._reachable_rate.cache_clear()


def test_the_runtimes_of_one_server_share_its_truth(measured: list[Case]) -> None:
    windows = [
        throughput_window(Case("stdlib", runtime, 300, 16.0), 32)
        for runtime in ("process", "url", "docker")
    ]
    assert measured == [Case("stdlib", "url", 300, 16.0)]  # the bare client's own server
    assert {w.reachable for w in windows} == {82.0}
    assert {w.nominal for w in windows} == {62.5}


def test_another_server_or_batch_is_measured_anew(measured: list[Case]) -> None:
    throughput_window(Case("flask", "process", 300, 16.0), 32)
    throughput_window(Case("flask", "docker", 1024, 16.0), 32)  # holds more memory
    throughput_window(Case("flask", "process", 300, 8.0), 32)  # serves faster
    throughput_window(Case("flask", "process", 300, 16.0), 8)  # smaller batches
    throughput_window(Case("fastapi", "process", 300, 16.0), 32)
    assert len(measured) == 5
