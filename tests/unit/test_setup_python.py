"""Which Python the scripts use (scripts/python.sh): Debian's own ``python3`` refuses ``pip
install`` (PEP 668), so set-up gives the project a ``.venv`` and every script then uses it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from configs.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "python.sh"
DEBIAN_PYTHON = Path("/usr/bin/python3")


def sourced(
    command: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f'source "{SCRIPT}"; {command}'],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_choice_is_python_then_the_project_venv_then_python3(tmp_path: Path) -> None:
    assert sourced("choose_python", tmp_path).stdout.strip() == "python3"
    venv_python = tmp_path / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text("#!/bin/sh\n")
    venv_python.chmod(0o755)
    assert sourced("choose_python", tmp_path).stdout.strip() == str(venv_python)
    chosen = sourced("choose_python", tmp_path, {"PYTHON": "/opt/py/bin/python3"})
    assert chosen.stdout.strip() == "/opt/py/bin/python3"


def test_a_virtual_environment_is_never_externally_managed(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "env")],
        check=True,
        timeout=120,
    )
    assert sourced(f'externally_managed "{tmp_path}/env/bin/python"', tmp_path).returncode == 1


def test_debians_own_python3_is_externally_managed(tmp_path: Path) -> None:
    if not DEBIAN_PYTHON.exists():
        pytest.skip("no /usr/bin/python3 here (not a Debian-like machine)")
    stdlib = subprocess.run(
        [str(DEBIAN_PYTHON), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    if not (Path(stdlib) / "EXTERNALLY-MANAGED").exists():
        pytest.skip(f"{DEBIAN_PYTHON} carries no PEP 668 marker (Debian's has since bookworm)")
    assert sourced(f'externally_managed "{DEBIAN_PYTHON}"', tmp_path).returncode == 0
