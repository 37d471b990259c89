"""Time ``scripts/run.sh`` on a fresh clone until every example leaderboard is ranked; print JSON.

The repository's committed head is cloned into a temporary folder and ``scripts/run.sh
--port P`` started there, with ``PYTHON`` pointing at a virtual environment of the clone's
own (``--system-site-packages``, so set-up's ``pip install`` adds only the package itself
and never re-points this interpreter's install). Measured from outside, polling every
0.25 s:

* ``listening_s``: the process's start to ``/health`` answering (set-up included);
* ``first_ranked_s``: for each task, to its board ranking its first model;
* ``ranked_s``: for each task, to its board ranking every example model of the catalog;
* ``all_ranked_s``: to the last of them.

``--cold`` first removes the example images and the base image (Docker's build cache for them
goes too with Docker's legacy builder; Debian's package cache and pip's stay), as on a machine that never built them,
and then measures a second fresh clone, whose images are now cached: the baseline. The
target is every board ranked within 60 s of a cold start on a 2-core machine.

Usage: ``python benchmarks/bench_first_start.py [--cold] [--timeout-s 900] [--keep-logs DIR]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from usecases.service import example_catalog  # noqa: E402

TARGET_S = 60.0
POLL_S = 0.25


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.load(response)
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return None


def forget_images() -> None:
    """Remove every example image and the base image (a machine that never built them)."""
    listed = subprocess.run(
        ["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    ours = [i for i in listed if i.startswith(("dynaeval-example/", "dynaeval/python-base:"))]
    if ours:
        subprocess.run(["docker", "rmi", "-f", *ours], check=True, capture_output=True)


def first_start(timeout_s: float, keep_log: Path | None = None) -> dict[str, Any]:
    """One fresh clone's ``scripts/run.sh``, timed until every board is ranked (its output
    copied to ``keep_log`` when given)."""
    expected: dict[str, int] = {}
    for entry in example_catalog():
        expected[entry["task"]] = expected.get(entry["task"], 0) + 1
    with tempfile.TemporaryDirectory(prefix="dynaeval-first-start-") as scratch:
        clone = Path(scratch) / "dynaeval"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        venv = clone / ".venv"
        subprocess.run(
            [sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True
        )
        env = {**os.environ, "PYTHON": str(venv / "bin" / "python")}
        port = free_port()
        base = f"http://127.0.0.1:{port}/api/v1"
        log = (Path(scratch) / "run.log").open("w")
        started = time.monotonic()
        proc = subprocess.Popen(
            ["scripts/run.sh", "--port", str(port)],
            cwd=clone,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        listening: float | None = None
        ranked: dict[str, float] = {}
        first: dict[str, float] = {}
        try:
            while len(ranked) < len(expected) and time.monotonic() - started < timeout_s:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"run.sh exited: {(Path(scratch) / 'run.log').read_text()[-2000:]}"
                    )
                if listening is None and get(f"{base}/health"):
                    listening = time.monotonic() - started
                for task in expected.keys() - ranked.keys() if listening is not None else ():
                    board = get(f"{base}/tasks/{task}/leaderboard") or {}
                    count = len(board.get("models", []))
                    if count:
                        first.setdefault(task, round(time.monotonic() - started, 1))
                    if count == expected[task]:
                        ranked[task] = round(time.monotonic() - started, 1)
                time.sleep(POLL_S)
        finally:
            with contextlib.suppress(ProcessLookupError):  # run.sh may have ended already
                os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()
            if keep_log is not None:
                keep_log.write_text((Path(scratch) / "run.log").read_text())
    return {
        "listening_s": None if listening is None else round(listening, 1),
        "first_ranked_s": first,
        "every_board_has_a_model_s": max(first.values()) if len(first) == len(expected) else None,
        "ranked_s": ranked,
        "all_ranked_s": max(ranked.values()) if len(ranked) == len(expected) else None,
        "timed_out": len(ranked) < len(expected),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", action="store_true", help="remove the images first")
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--keep-logs", type=Path, help="a folder for each start's output")
    args = parser.parse_args()
    logs: Path | None = args.keep_logs
    if logs is not None:
        logs.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"target_all_ranked_s": TARGET_S, "cpus": os.cpu_count()}
    if args.cold:
        forget_images()
        report["cold"] = first_start(args.timeout_s, logs and logs / "cold.log")
    report["warm"] = first_start(args.timeout_s, logs and logs / "warm.log")
    for name in ("cold", "warm"):
        done = report.get(name, {}).get("all_ranked_s")
        if done is not None:
            report[f"{name}_all_ranked_vs_target"] = round(done / TARGET_S, 2)
    cold, warm = report.get("cold", {}).get("all_ranked_s"), report["warm"]["all_ranked_s"]
    if cold is not None and warm:
        report["cold_vs_warm"] = round(cold / warm, 2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
