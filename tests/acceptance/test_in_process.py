"""The in-process runner behaves as a process would, and leaves this process as it was."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from client import cli
from tests.acceptance.conftest import run_in_process


@pytest.mark.parametrize("verbose", [["-v"], []])
def test_log_levels_are_restored_after_a_command(
    cli_env: dict[str, str], tmp_path: Path, verbose: list[str]
) -> None:
    loggers = [logging.getLogger(name) for name in ("", "alembic", "werkzeug")]
    saved = [logger.level for logger in loggers]
    ours = [logging.ERROR, logging.DEBUG, logging.NOTSET]  # none of them main's choice
    try:
        for logger, level in zip(loggers, ours, strict=True):
            logger.setLevel(level)
        done = run_in_process([*verbose, "tasks", "--json"], cli_env, tmp_path)
        assert done.returncode == 0, done.stderr
        assert [logger.level for logger in loggers] == ours
    finally:
        for logger, level in zip(loggers, saved, strict=True):
            logger.setLevel(level)


def test_an_uncaught_exception_is_status_1_with_its_traceback(
    cli_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(argv: object = None) -> int:
        raise RuntimeError("boom in the handler")

    monkeypatch.setattr(cli, "main", broken)
    done = run_in_process(["tasks"], cli_env, tmp_path)
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "RuntimeError: boom in the handler" in done.stderr


@pytest.mark.parametrize("args", [["serve"], ["-v", "worker", "--burst"]])
def test_a_server_or_worker_is_refused_in_process(
    cli_env: dict[str, str], tmp_path: Path, args: list[str]
) -> None:
    with pytest.raises(AssertionError, match="run_process"):
        run_in_process(args, cli_env, tmp_path)
