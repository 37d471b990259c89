"""Time the first leaderboards a fresh ``dynaeval serve`` answers; print JSON.

A data folder is seeded through the store with 10,000 scored ``sentiment`` models
(``bench_page.seed``: no containers), another with 10 (the baseline). For each, a fresh
``dynaeval serve --no-examples --workers 0`` process is started on a free loopback port and,
measured from outside over HTTP:

* ``first_board_ms``: ``GET /api/v1/tasks/sentiment/leaderboard`` sent the moment the
  server answers ``/health`` (liveness: the board may still be being prepared, the worst
  case) on a folder no server ever served, so no board was kept;
* ``ready_after_start_s`` and ``first_board_after_ready_ms``: on a copy of that folder, also
  never served, how long after the process started ``/ready`` answered 200 (every task's
  board prepared: what a load balancer waits for), and the board asked for then;
* ``after_warmup_ms``: the same request once the background preparation had ``WARMUP_S``;
* ``reweighted_page_ms``: median of 20 re-weighted pages of 100 (each weights distinct);
* ``after_new_result_ms``: one more result stored (by this process, through the store, as a
  worker would) and, ``WARMUP_S`` later, the board again (it holds the new model);
* ``first_board_after_restart_ms``: that server stopped (SIGTERM) and another started on
  the same folder, the board asked for the moment it answers ``/health`` (it reads back the
  board the last one kept instead of preparing it);
* ``first_board_after_results_while_down_ms``: that server stopped, one more result stored
  while none runs (a worker of its own, as in the compose deployment), a server started, the
  board asked for at ``/health`` (the kept board is out of date: prepared from the rows), and
  ``ready_after_results_while_down_s``.

Targets at 10,000 models: the first board a viewer is sent to after a (re)start 200 ms
(after a restart at ``/health``; on a never-served folder at ``/ready``), re-weighted page
20 ms. Ratios are to the 10-model service measured in the same run.

Usage: ``python benchmarks/bench_board_start.py [--models N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_page import DOCKER, TASK, seed, synthetic_result  # noqa: E402
from usecases.service import Service  # noqa: E402

WARMUP_S = 5.0
BOARD = f"/api/v1/tasks/{TASK}/leaderboard"
TARGETS_MS = {
    "first_board_after_restart_ms": 200.0,
    "first_board_after_ready_ms": 200.0,
    "reweighted_page_ms": 20.0,
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def timed_get(url: str) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    response = requests.get(url, timeout=120)
    elapsed = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    return round(elapsed, 1), response.json()


@dataclasses.dataclass
class Started:
    """A running ``serve``: its base URL and how long after its start it answered."""

    base: str
    started: float  # time.monotonic() just before the process was started
    answered_s: float  # until /health (or /ready) first answered 200


@contextlib.contextmanager
def serving(data: Path, *, until: str = "health") -> Iterator[Started]:
    """A fresh ``serve`` on ``data``, answering ``/<until>`` (``health``: alive; ``ready``:
    every board prepared); stopped by SIGTERM (it keeps its boards on the way out) and
    waited for."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DYNAEVAL_DATA_DIR": str(data)}
    command = [sys.executable, "-m", "client.cli", "serve", "--port", str(port)]
    command += ["--no-examples", "--workers", "0"]
    started = time.monotonic()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = started + 120
        while True:
            try:
                if requests.get(f"{base}/api/v1/{until}", timeout=2).ok:
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"serve did not answer /{until}")
            time.sleep(0.02)
        yield Started(base, started, round(time.monotonic() - started, 2))
    finally:
        proc.terminate()
        proc.wait(timeout=120)


def add_result(data: Path, name: str, index: int) -> None:
    """One more scored model, stored by this process through the store as a worker would."""
    service = Service.open(data)
    try:
        _, job_id = service.store.submit(TASK, name, DOCKER)
        claimed = service.store.claim("bench-worker", 60)
        assert claimed is not None and claimed.id == job_id
        evaluation = synthetic_result(service, random.Random(index), index)
        assert service.store.finish(job_id, "bench-worker", evaluation, lease=claimed.lease)
    finally:
        service.close()


def measure(data: Path, n: int) -> dict[str, Any]:
    never_served = data.with_name(data.name + "-copy")
    shutil.copytree(data, never_served)  # served second: the first serve has the cold files
    with serving(data) as server:
        base = server.base
        first, board = timed_get(base + BOARD)
        assert board["total_models"] == n, board["total_models"]
        time.sleep(WARMUP_S)
        warm, _ = timed_get(base + BOARD)
        rng = random.Random(1)
        pages = []
        for _ in range(20):
            weights = ",".join(
                f"{a}:{rng.randint(0, 10) / 2}"
                for a in ("performance", "throughput", "memory", "robustness", "fairness")
            )
            pages.append(timed_get(f"{base}{BOARD}?weights={weights}&limit=100")[0])
        with serving(never_served, until="ready") as copy:
            after_ready, board = timed_get(copy.base + BOARD)
            assert board["total_models"] == n, board["total_models"]
            ready_s = copy.answered_s
        add_result(data, "model-new", n)
        time.sleep(WARMUP_S)
        landed, board = timed_get(base + BOARD)
        assert board["total_models"] == n + 1
    with serving(data) as server:  # a restart: the board the last run kept
        restarted, board = timed_get(server.base + BOARD)
        assert board["total_models"] == n + 1
    add_result(data, "model-while-down", n + 1)  # the kept board is now out of date
    with serving(data) as server:
        while_down, board = timed_get(server.base + BOARD)
        assert board["total_models"] == n + 2
    add_result(data, "model-while-down-2", n + 2)
    with serving(data, until="ready") as server:
        ready_while_down_s = server.answered_s
    return {
        "models": n,
        "first_board_ms": first,
        "ready_after_start_s": ready_s,
        "first_board_after_ready_ms": after_ready,
        "after_warmup_ms": warm,
        "reweighted_page_ms": round(statistics.median(pages), 1),
        "reweighted_page_p90_ms": sorted(pages)[17],
        "after_new_result_ms": landed,
        "first_board_after_restart_ms": restarted,
        "first_board_after_results_while_down_ms": while_down,
        "ready_after_results_while_down_s": ready_while_down_s,
    }


def seeded(folder: Path, n: int) -> Path:
    data = folder / f"data-{n}"
    service = Service.open(data)
    try:
        seed(service, n)
    finally:
        service.close()
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=10_000)
    n = parser.parse_args().models
    with tempfile.TemporaryDirectory(prefix="dynaeval-bench-start-") as tmp:
        folder = Path(tmp)
        big = measure(seeded(folder, n), n)
        small = measure(seeded(folder, 10), 10)
    ratios = {
        f"{key}_over_10": round(big[key] / max(small[key], 1e-3), 2)
        for key in (
            "first_board_ms",
            "ready_after_start_s",
            "first_board_after_ready_ms",
            "after_warmup_ms",
            "reweighted_page_ms",
            "after_new_result_ms",
            "first_board_after_restart_ms",
            "first_board_after_results_while_down_ms",
            "ready_after_results_while_down_s",
        )
    }
    met = {key: big[key] <= target for key, target in TARGETS_MS.items()}
    report: dict[str, Any] = {
        "big": big,
        "baseline": small,
        "ratios": ratios,
        "targets_ms": TARGETS_MS,
        "target_met": met,
    }
    report["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
