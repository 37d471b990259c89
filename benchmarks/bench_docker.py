"""Docker runtime cost: cold start → healthy, and per-batch overhead vs a local process.

    python benchmarks/bench_docker.py [--starts 5] [--batches 500] [--batch-size 32]

Runs the null example model (examples/models/null) both in the Docker sandbox and as a
local process, sends identical keep-alive /predict batches to each, and prints JSON with
medians and the docker/process ratios. Builds the base and example images if missing.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from client.examples import build_base_image, build_image, folder_entry  # noqa: E402
from configs.schema import Limits  # noqa: E402
from evaluator.runtimes.docker.runtime import DockerRuntime  # noqa: E402
from evaluator.runtimes.process import ProcessRuntime  # noqa: E402
from evaluator.runtimes.runtime import Runtime  # noqa: E402
from evaluator.transport.endpoint import Endpoint  # noqa: E402

IMAGE = "dynaeval-example/null:latest"
LIMITS = Limits(memory_gib=0.5, cpus=1.0)


def wait_healthy(endpoint: Endpoint, budget_s: float = 60.0) -> None:
    """Poll GET /health every 10 ms until 200."""
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=1)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                conn.close()
                return
        except OSError:
            pass
        time.sleep(0.01)
    raise TimeoutError("model never healthy")


def cold_starts(n: int) -> dict[str, float]:
    """Median seconds: start() (network + guard + container), and start → healthy."""
    starts, healthy, stops = [], [], []
    for _ in range(n):
        runtime = DockerRuntime(IMAGE, LIMITS, label_owner="bench-docker")
        t0 = time.perf_counter()
        endpoint = runtime.start()
        t1 = time.perf_counter()
        wait_healthy(endpoint)
        t2 = time.perf_counter()
        runtime.stop()
        t3 = time.perf_counter()
        starts.append(t1 - t0)
        healthy.append(t2 - t0)
        stops.append(t3 - t2)
    return {
        "start_call_s": round(statistics.median(starts), 3),
        "cold_start_to_healthy_s": round(statistics.median(healthy), 3),
        "stop_s": round(statistics.median(stops), 3),
        "runs": n,
    }


def batch_latencies(runtime: Runtime, batches: int, batch_size: int) -> list[float]:
    """Seconds per keep-alive POST /predict of ``batch_size`` instances (after 20 warm-ups)."""
    endpoint = runtime.start()
    try:
        wait_healthy(endpoint)
        body = json.dumps(
            {
                "task": "sentiment",
                "instances": [
                    {"uid": f"u{i}", "statement": f"statement number {i} is fine"}
                    for i in range(batch_size)
                ],
            }
        ).encode()
        headers = {"Content-Type": "application/json"}
        conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=30)
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        seconds = []
        for i in range(batches + 20):
            started = time.perf_counter()
            conn.request("POST", "/predict", body=body, headers=headers)
            reply = conn.getresponse().read()
            if i >= 20:
                seconds.append(time.perf_counter() - started)
        assert len(json.loads(reply)["predictions"]) == batch_size
        conn.close()
        return seconds
    finally:
        runtime.stop()


def summary(seconds: list[float], batch_size: int) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "median_ms": round(statistics.median(ms), 3),
        "p95_ms": round(ms[int(len(ms) * 0.95) - 1], 3),
        "examples_per_s": round(batch_size * len(seconds) / sum(seconds), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--batches", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    build_base_image()
    build_image(folder_entry("null"))

    cold = cold_starts(args.starts)
    docker_s = batch_latencies(
        DockerRuntime(IMAGE, LIMITS, label_owner="bench-docker"), args.batches, args.batch_size
    )
    process = ProcessRuntime(
        [sys.executable, str(REPO / "examples/models/null/model.py")], limits=LIMITS
    )
    process_s = batch_latencies(process, args.batches, args.batch_size)
    docker_summary = summary(docker_s, args.batch_size)
    process_summary = summary(process_s, args.batch_size)
    result = {
        "benchmark": "docker_runtime",
        "batch_size": args.batch_size,
        "batches": args.batches,
        "cold_start": cold,
        "docker": docker_summary,
        "process": process_summary,
        "ratios": {
            "median_latency_docker_over_process": round(
                docker_summary["median_ms"] / process_summary["median_ms"], 3
            ),
            "throughput_docker_over_process": round(
                docker_summary["examples_per_s"] / process_summary["examples_per_s"], 3
            ),
            "overhead_ms_per_batch": round(
                docker_summary["median_ms"] - process_summary["median_ms"], 3
            ),
        },
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
