"""Acceptance fixtures: the ``dynaeval`` command, in this process or as a real one, in a
temporary data folder, talking to 127.0.0.1 only."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import traceback
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
    """``run("tasks", "--json")`` → CompletedProcess (text): ``dynaeval``'s ``main`` called in
    this process, with the command's environment, folder and output streams, so a case costs
    its work and not an interpreter's start. Where the process itself is the point (a worker,
    signals, a terminal, the console script), use ``run_process``; every subcommand is also
    started once as a process (``test_every_subcommand_has_help``)."""

    def _run(
        *args: str, timeout: float = 180, cwd: Path = REPO
    ) -> subprocess.CompletedProcess[str]:
        del timeout  # pytest-timeout bounds an in-process case (pyproject's ``timeout``)
        return run_in_process(list(args), cli_env, cwd)

    return _run


@pytest.fixture
def run_process(cli_env: dict[str, str]) -> Run:
    """``run`` as a real ``dynaeval`` process, bounded by a timeout."""

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


IN_PROCESS_REFUSED = frozenset({"serve", "worker"})  # they outlive the call: run_process


def run_in_process(
    args: list[str], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """``client.cli.main(args)`` as a process would see it: exactly ``env`` as the
    environment, ``cwd`` as the folder, stdout and stderr captured (not terminals), log
    records at main's level and in its format on stderr, an uncaught exception as a
    traceback and status 1, and the process-wide state it may change (signal handlers,
    logger levels) restored."""
    from client.cli import LOG_FORMAT, main

    command = next((arg for arg in args if not arg.startswith("-")), None)  # -v is global
    if command in IN_PROCESS_REFUSED:
        raise AssertionError(f"{args}: a server or worker is a process; use run_process")
    saved_env, saved_cwd = dict(os.environ), Path.cwd()
    saved_signals = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    loggers = [logging.getLogger(name) for name in ("", "alembic", "werkzeug")]
    saved_levels = [logger.level for logger in loggers]
    out, err = io.StringIO(), io.StringIO()
    # main's basicConfig does nothing here (pytest holds the root logger's handlers), so
    # the case's own handler and level stand in for the ones a process would get
    level = logging.INFO if {"-v", "--verbose"} & set(args) else logging.WARNING
    to_stderr = logging.StreamHandler(err)
    to_stderr.setFormatter(logging.Formatter(LOG_FORMAT))
    to_stderr.setLevel(level)
    root = loggers[0]
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    root.addHandler(to_stderr)
    root.setLevel(level)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(args)
            except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
                code = exit_code(exc)
            except Exception:  # what the interpreter does with an uncaught exception
                traceback.print_exc()
                code = 1
    finally:
        root.removeHandler(to_stderr)
        for logger, saved in zip(loggers, saved_levels, strict=True):
            logger.setLevel(saved)
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for sig, handler in saved_signals.items():
            signal.signal(sig, handler)
    return subprocess.CompletedProcess(["dynaeval", *args], code, out.getvalue(), err.getvalue())


def exit_code(exc: SystemExit) -> int:
    """The status a process ending with ``exc`` would have."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)  # sys.exit("message"): printed, status 1
    return 1


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
