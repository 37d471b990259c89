"""`dynaeval --help` starts fast because it imports none of the heavy libraries: the store's
SQLAlchemy, numpy (through the task loader and the metrics), Flask, and the HTTP client and
progress bars (requests, rich: a quarter of a second) come only with the commands that use
them. Checked by what is imported, never by the clock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from configs.paths import REPO_ROOT

_PROBE = """
import contextlib, io, json, sys
from client.cli import build_parser
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    build_parser().parse_args(sys.argv[1:])
heavy = ("sqlalchemy", "numpy", "flask", "pandas", "requests", "rich")
print(json.dumps(sorted(m for m in heavy if m in sys.modules)))
"""


def _imported(probe: str, *args: str, env: dict[str, str] | None = None) -> list[str]:
    """What ``probe`` (run with ``args`` in a fresh interpreter) prints as loaded."""
    found = subprocess.run(
        [sys.executable, "-c", probe, *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return list(json.loads(found.stdout.strip().splitlines()[-1]))


def _heavy_imports(*args: str) -> list[str]:
    return _imported(_PROBE, *args)


def test_help_imports_no_heavy_library() -> None:
    assert _heavy_imports("--help") == []
    assert _heavy_imports("submit", "--help") == []


_RUN_PROBE = """
import contextlib, io, json, sys
from client.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main(sys.argv[1:])
print(json.dumps(sorted(m for m in ("pandas", "worker.worker") if m in sys.modules)))
"""


def test_account_commands_on_the_local_database_load_no_worker(tmp_path: Path) -> None:
    """Users and tokens on the local database open the store, never the worker and the
    evaluator it brings (pandas among them): only commands that evaluate or run workers pay
    for those."""
    env = {**os.environ, "DYNAEVAL_DATA_DIR": str(tmp_path / "data")}
    for args in (("users", "list", "--json"), ("tokens", "list", "--user", "nobody")):
        assert _imported(_RUN_PROBE, *args, env=env) == [], args


_WEB_PROBE = """
import contextlib, io, json, sys
from client.cli import main
code = None
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as stop:
        code = stop.code
loaded = sorted(m for m in ("flask", "werkzeug", "marshmallow") if m in sys.modules)
print(json.dumps([code, loaded]))
"""


def test_rules_on_the_command_line_load_no_web_framework(tmp_path: Path) -> None:
    """A leaderboard, a task's rounds and a rescore on the local database call the use
    cases the API calls, without the API: no Flask, no werkzeug, no marshmallow (and each
    command ran to its end: 0, never argparse's 2)."""
    env = {**os.environ, "DYNAEVAL_DATA_DIR": str(tmp_path / "data")}
    for args in (("leaderboard", "sentiment"), ("rounds", "list", "sentiment"), ("rescore",)):
        code, loaded = _imported(_WEB_PROBE, *args, env=env)
        assert (code, loaded) == (0, []), args
