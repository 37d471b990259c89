"""SIGTERM and SIGINT mean the same to ``dynaeval serve`` and ``dynaeval worker``: stop
taking work, let the running job finish within ``--grace-s``, exit 0 with a stopping line;
a second signal hands the job back at once. (A running job being handed back and its
containers removed is the worker's own test; here no job runs.)"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.conftest import REPO, answers, dynaeval_command, free_port
from tests.conftest import wait_until

UP_S = 60.0
STOP_S = 30.0


@contextlib.contextmanager
def started(
    cli_env: dict[str, str], log_path: Path, args: list[str], ready: str
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """``dynaeval ARGS`` until its output shows ``ready`` (a URL to answer, or a line)."""
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [*dynaeval_command(), *args],
            cwd=REPO,
            env=cli_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:

        def is_ready() -> bool:
            if proc.poll() is not None:
                return True
            if ready.startswith("http://"):
                return answers(ready)
            return ready in log_path.read_text()

        wait_until(is_ready, UP_S, f"{args[0]} to start")
        assert proc.poll() is None, log_path.read_text()[-3000:]
        yield proc, log_path
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def stop(proc: subprocess.Popen[bytes], log_path: Path, *signums: int) -> str:
    for number, signum in enumerate(signums, 1):
        proc.send_signal(signum)
        # the next only once this one was handled: two signals pending at once are handled
        # in signal-number order (SIGINT before SIGTERM), whatever order they came in
        deadline = time.monotonic() + STOP_S
        while log_path.read_text().count("dynaeval serve: stopping") < number:
            if time.monotonic() > deadline or proc.poll() is not None:
                break
            time.sleep(0.05)
    code = proc.wait(timeout=STOP_S)
    output = log_path.read_text()
    assert code == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    return output


def serve_args(port: int, workers: int = 0) -> list[str]:
    return ["serve", "--port", str(port), "--workers", str(workers), "--no-examples"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_serve_stops_on_either_signal(tmp_path: Path, cli_env: dict[str, str], signum: int) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with started(cli_env, tmp_path / "serve.log", serve_args(port, 1), base) as (proc, log):
        with urllib.request.urlopen(base + "/api/v1/health", timeout=10) as response:  # noqa: S310
            assert response.headers["Server"] == "Dynaeval"
        output = stop(proc, log, signum)
    name = signal.Signals(signum).name
    assert f"dynaeval serve: stopping ({name})" in output
    assert output.rstrip().endswith("dynaeval serve: stopped")
    assert not answers(base)


def test_a_second_signal_stops_serve_at_once(tmp_path: Path, cli_env: dict[str, str]) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with started(cli_env, tmp_path / "serve.log", serve_args(port), base) as (proc, log):
        output = stop(proc, log, signal.SIGTERM, signal.SIGINT)
    assert "stopping (SIGTERM)" in output
    assert "stopped" in output


def test_serve_on_the_dev_server_stops_too(tmp_path: Path, cli_env: dict[str, str]) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = [*serve_args(port), "--dev-server"]
    with started(cli_env, tmp_path / "serve.log", args, base) as (proc, log):
        output = stop(proc, log, signal.SIGTERM)
    assert "dynaeval serve: stopped" in output


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_worker_stops_on_either_signal(
    tmp_path: Path, cli_env: dict[str, str], signum: int
) -> None:
    args = ["worker", "--name", f"sig-{signum}", "--grace-s", "5"]
    with started(cli_env, tmp_path / "worker.log", args, "taking jobs") as (proc, log):
        output = stop(proc, log, signum)
    assert f"dynaeval worker: stopping ({signal.Signals(signum).name})" in output
    assert "0 done, 0 failed" in output and output.rstrip().endswith("dynaeval worker: stopped")


def test_worker_logs_json_lines(tmp_path: Path, cli_env: dict[str, str]) -> None:
    args = ["-v", "worker", "--name", "json", "--log-format", "json"]
    with started(cli_env, tmp_path / "worker.log", args, "taking jobs") as (proc, log):
        output = stop(proc, log, signal.SIGTERM)
    # (an idle worker may be gone before a second signal: two signals are serve's test)
    assert "dynaeval worker: stopping (SIGTERM)" in output
    logged = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert all({"time", "level", "logger", "message"} <= set(entry) for entry in logged)
