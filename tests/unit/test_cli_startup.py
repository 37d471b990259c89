"""`dynaeval --help` starts fast because it imports none of the heavy libraries: the store's
SQLAlchemy, numpy (through the task loader and the metrics) and Flask come only with the
commands that use them. Checked by what is imported, never by the clock."""

from __future__ import annotations

import json
import subprocess
import sys

from configs.paths import REPO_ROOT

_PROBE = """
import contextlib, io, json, sys
from client.cli import build_parser
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    build_parser().parse_args(sys.argv[1:])
print(json.dumps(sorted(m for m in ("sqlalchemy", "numpy", "flask", "pandas") if m in sys.modules)))
"""


def _heavy_imports(*args: str) -> list[str]:
    found = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return list(json.loads(found.stdout.strip().splitlines()[-1]))


def test_help_imports_no_heavy_library() -> None:
    assert _heavy_imports("--help") == []
    assert _heavy_imports("submit", "--help") == []
