"""The CLI uses the same use cases as the API without importing any of HTTP: no Flask, no
Werkzeug, no marshmallow. Checked by what the commands import, in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from configs.paths import REPO_ROOT

HTTP_LIBRARIES = ("flask", "flask_smorest", "werkzeug", "marshmallow", "waitress")
_PROBE = """
import contextlib, io, json, sys
from client.cli import main
codes = []
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        codes.append(main(argv))
loaded = sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)
print(json.dumps({"codes": codes, "loaded": loaded}))
"""


def _run(data_dir: Path, *commands: list[str]) -> dict[str, list]:
    found = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(commands), json.dumps(HTTP_LIBRARIES)],
        cwd=REPO_ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(data_dir), "DYNAEVAL_DATA_DIR": str(data_dir)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return dict(json.loads(found.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
def test_reading_commands_use_the_use_cases_without_http(tmp_path: Path) -> None:
    ran = _run(
        tmp_path,
        ["leaderboard", "sentiment"],
        ["rounds", "list", "sentiment"],
        ["status", "no-such-model"],
        ["rescore"],
        ["rerun", "no-such-model"],
        ["leaderboard", "sentiment", "--weights", "memory:0", "--rounds", "r1:2"],
    )
    assert ran["codes"][:2] == [0, 0] and ran["codes"][2] != 0  # an unknown model is an error
    assert ran["codes"][4] == 2 and ran["codes"][5] == 0
    assert ran["loaded"] == []


@pytest.mark.slow
def test_changing_a_round_from_the_cli_imports_no_http(tmp_path: Path) -> None:
    data = tmp_path / "r9.jsonl"
    rows = [
        {"uid": f"u{i}", "statement": f"a {word} film", "label": label, "topic": "movies"}
        for i, (word, label) in enumerate([("fine", "positive"), ("bad", "negative")] * 3)
    ]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    ran = _run(tmp_path, ["rounds", "add", "sentiment", "r9", str(data)])
    assert ran == {"codes": [0], "loaded": []}
