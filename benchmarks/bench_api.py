"""Requests per second through the production server (waitress) against werkzeug's
development server, measured in the same run; print JSON.

A SQLite store (a file, as ``serve`` runs it) gets ``N_MODELS`` finished submissions on
one task. ``dynaeval serve --workers 0 --no-examples`` runs on it as a subprocess, once
with waitress (``--threads THREADS``) and once with ``--dev-server`` (the baseline); in
this process ``CLIENTS`` threads, each with its own keep-alive ``requests.Session``, ask
for one route as fast as they can for ``DURATION_S`` seconds:

* ``leaderboard``: ``GET /api/v1/tasks/sentiment/leaderboard`` (public);
* ``status``: ``GET /api/v1/submissions/<id>`` (the local admin's token), the route a
  ``submit --wait`` polls.

``*_rps`` is completed 200 answers per second; ``*_ratio`` is waitress over the dev
server. Traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from configs.vocabulary.results import EvaluationResult, Score, ScoreKey  # noqa: E402
from usecases.service import Service  # noqa: E402

N_MODELS = 200
CLIENTS = 32
THREADS = 8
DURATION_S = 8.0
DOCKER = {"kind": "docker", "image": "registry.example.org/model:1", "protocol": "v1"}


def seed(data_dir: Path) -> str:
    """``N_MODELS`` finished submissions on ``sentiment``; the id of the first."""
    service = Service.open(data_dir)
    ids = []
    try:
        for i in range(N_MODELS):
            model_id, job_id = service.store.submit("sentiment", f"model-{i}", DOCKER)
            claimed = service.store.claim("bench", 60)
            assert claimed is not None and claimed.id == job_id
            assert service.store.finish(job_id, "bench", result(i), lease=claimed.lease)
            ids.append(model_id)
    finally:
        service.close()
    return ids[0]


def result(i: int) -> EvaluationResult:
    perf = 50.0 + (i * 37 % 45)
    axes = {"performance": perf, "throughput": 10.0 + i % 90, "memory": 0.5 + i % 7 / 4}
    axes |= {"robustness": 60.0 + i % 30, "fairness": 70.0 + i % 25, "metric": "macro_f1"}
    return EvaluationResult(
        task="sentiment",
        status="done",
        summary=axes,
        rounds=[{"round": "r1", "performance": perf, "performance_ci": None}],
        scores=[Score(ScoreKey("sentiment", "r1", "test", "h" * 64, metric="macro_f1"), perf, 84)],
        provenance={"code_version": "bench", "dataset_hashes": {"r1/test": "h" * 64}},
    )


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_serve(data_dir: Path, dev: bool) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "DYNAEVAL_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
    args = ["serve", "--port", str(port), "--workers", "0", "--no-examples"]
    args += ["--dev-server"] if dev else ["--threads", str(THREADS)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "client.cli", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            requests.get(base + "/api/v1/health", timeout=2)
            return proc, base
        except requests.ConnectionError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("serve did not answer")


def hammer(url: str, headers: dict[str, str]) -> dict[str, float]:
    """``CLIENTS`` threads asking for ``url`` for ``DURATION_S``: answers per second."""
    counts = [0] * CLIENTS
    errors = [0] * CLIENTS
    deadline = time.monotonic() + DURATION_S

    def client(index: int) -> None:
        with requests.Session() as session:
            while time.monotonic() < deadline:
                try:
                    ok = session.get(url, headers=headers, timeout=30).status_code == 200
                except requests.RequestException:
                    ok = False
                counts[index] += ok
                errors[index] += not ok

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    return {"rps": round(sum(counts) / elapsed, 1), "errors": sum(errors)}


def measure(data_dir: Path, model_id: str, dev: bool) -> dict[str, Any]:
    proc, base = start_serve(data_dir, dev)
    token = json.loads((data_dir / "local-admin.json").read_text())["token"]
    try:
        board = hammer(base + "/api/v1/tasks/sentiment/leaderboard", {})
        status = hammer(
            base + f"/api/v1/submissions/{model_id}", {"Authorization": f"Bearer {token}"}
        )
    finally:
        proc.terminate()
        proc.wait(60)
    return {"leaderboard": board, "status": status}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        model_id = seed(data_dir)
        dev = measure(data_dir, model_id, dev=True)
        prod = measure(data_dir, model_id, dev=False)
    report: dict[str, Any] = {
        "models": N_MODELS,
        "clients": CLIENTS,
        "waitress_threads": THREADS,
        "duration_s": DURATION_S,
        "cpus": os.cpu_count(),
    }
    for route in ("leaderboard", "status"):
        report[f"{route}_dev_server_rps"] = dev[route]["rps"]
        report[f"{route}_waitress_rps"] = prod[route]["rps"]
        report[f"{route}_ratio"] = round(prod[route]["rps"] / max(dev[route]["rps"], 1e-9), 2)
        report[f"{route}_errors"] = {
            "dev_server": dev[route]["errors"],
            "waitress": prod[route]["errors"],
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
