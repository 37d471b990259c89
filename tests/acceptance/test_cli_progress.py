"""``evaluate`` draws a progress bar on a terminal (a pseudo-terminal here) and stays quiet
in pipes and with ``--json``."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time

from tests.acceptance.conftest import REPO, Run, dynaeval_command

MAJORITY = "examples/models/majority/model.py"


def _run_on_a_terminal(
    cli_env: dict[str, str], *args: str, timeout: float = 180
) -> tuple[int, str]:
    """Run the CLI with stdout and stderr on a pseudo-terminal; its exit code and screen."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [*dynaeval_command(), *args],
        cwd=REPO,
        env={**cli_env, "TERM": "xterm", "COLUMNS": "120"},
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    screen = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the terminal closed: the process is gone
                    break
                if not chunk:
                    break
                screen += chunk
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=30)
    finally:
        proc.kill()
        os.close(leader)
    return code, screen.decode("utf-8", "replace")


def test_evaluate_draws_a_progress_bar_on_a_terminal(cli_env: dict[str, str]) -> None:
    code, screen = _run_on_a_terminal(cli_env, "evaluate", MAJORITY, "--task", "sentiment")
    assert code == 0, screen
    assert "━" in screen and "%" in screen  # rich's bar and its percentage
    assert "task sentiment (macro_f1): performance" in screen  # the report itself follows


def test_evaluate_is_quiet_in_a_pipe(run: Run) -> None:
    done = run("evaluate", MAJORITY, "--task", "sentiment")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and "━" not in done.stdout


def test_evaluate_json_on_a_terminal_has_no_bar(cli_env: dict[str, str]) -> None:
    code, screen = _run_on_a_terminal(
        cli_env, "evaluate", MAJORITY, "--task", "sentiment", "--json"
    )
    assert code == 0, screen
    assert "━" not in screen and screen.lstrip().startswith("{")
