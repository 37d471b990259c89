"""A command that cannot open its data folder or database says so in one line and exits 2,
with no traceback and no password from the database URL."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from configs.paths import REPO_ROOT


def run(env_extra: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **env_extra}
    return subprocess.run(
        [sys.executable, "-m", "client.cli", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_data_folder_that_cannot_be_made_is_one_line_and_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    done = run({"DYNAEVAL_DATA_DIR": str(blocker / "data")}, "users", "list")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "the data folder cannot be used" in done.stderr and "Not a directory" in done.stderr


def test_a_database_that_does_not_answer_is_one_line_without_its_password(
    tmp_path: Path,
) -> None:
    with socket.socket() as sock:  # a loopback port nothing listens on (bound, never listening)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        url = f"postgresql+psycopg://user:s3cret-pw@127.0.0.1:{port}/dynaeval"
        env = {"DYNAEVAL_DATA_DIR": str(tmp_path / "data"), "DYNAEVAL_DATABASE_URL": url}
        done = run(env, "users", "list")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "s3cret-pw" not in done.stderr
    assert "the database cannot be opened" in done.stderr
