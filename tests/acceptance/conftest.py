"""Acceptance fixtures: the real ``dynaeval`` command as a subprocess, in a temporary data
folder, talking to 127.0.0.1 only."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def dynaeval_command() -> list[str]:
    """The installed console script, or the module when only the source tree is there."""
    script = Path(sys.executable).with_name("dynaeval")
    if script.exists():
        return [str(script)]
    found = shutil.which("dynaeval")
    return [found] if found else [sys.executable, "-m", "client.cli"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def cli_env(data_dir: Path) -> dict[str, str]:
    keep = ("DYNAEVAL_LOCK_DIR", "DYNAEVAL_REQUIRE_DOCKER")  # set by the test session
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYNAEVAL_") or k in keep}
    env["DYNAEVAL_DATA_DIR"] = str(data_dir)
    # Stored credentials go to a folder of the test's own, never the real ~/.config.
    env["XDG_CONFIG_HOME"] = str(data_dir.parent / "config")
    env["PYTHONUNBUFFERED"] = "1"
    return env


Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run(cli_env: dict[str, str]) -> Run:
    """``run("tasks", "--json")`` → CompletedProcess (text), bounded by a timeout."""

    def _run(
        *args: str, timeout: float = 180, cwd: Path = REPO
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*dynaeval_command(), *args],
            cwd=cwd,
            env=cli_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    return _run


def answers(base: str) -> bool:
    """Whether a Dynaeval server at ``base`` answers its health route."""
    try:
        with urllib.request.urlopen(base + "/api/v1/health", timeout=2):  # noqa: S310
            return True
    except OSError:
        return False


@contextlib.contextmanager
def serving(cli_env: dict[str, str], log_path: Path) -> Iterator[tuple[str, list[str]]]:
    """``dynaeval serve`` with no worker and no examples on a free loopback port: yields its
    base URL and a list that holds the server's whole output once it has stopped."""
    from tests.conftest import wait_until

    port = free_port()
    output: list[str] = []
    with log_path.open("w+") as log:
        proc = subprocess.Popen(
            [*dynaeval_command(), "serve", "--port", str(port), "--workers", "0", "--no-examples"],
            cwd=REPO,
            env=cli_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until(lambda: answers(base) or proc.poll() is not None, 60, "serve to answer")
            assert proc.poll() is None, "serve exited before answering"
            yield base, output
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
            log.seek(0)
            output.append(log.read())
