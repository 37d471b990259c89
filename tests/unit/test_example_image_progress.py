"""A first start says what it waits for while the example images build, and set-up builds
every image serve needs (the per-task variants included), so serve finds them cached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import client.examples as examples
from configs.paths import REPO_ROOT


def test_the_build_says_what_it_waits_for(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(examples.subprocess, "run", lambda cmd, **_: ran.append(list(cmd)))
    lines: list[str] = []
    assert examples.build_example_images(progress=lines.append)
    variants = [e for e in examples.example_catalog() if e.get("args")]
    assert variants, "the catalog has per-task variants (the majority baselines)"
    assert "first time takes a minute" in lines[0]
    for number, entry in enumerate(variants, start=1):
        assert f"building {examples.example_image(entry)} ({number}/{len(variants)})" in lines
    assert lines[-1] == "example model images ready"
    assert len(ran) == 1 + len(variants)


def test_a_failed_build_is_said_and_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(cmd: Any, **_: Any) -> None:
        raise examples.subprocess.CalledProcessError(1, cmd, stderr=b"no space left")

    monkeypatch.setattr(examples.subprocess, "run", fail)
    assert examples.build_example_images(progress=lambda line: None) is False


def test_setup_builds_the_variants_serve_needs() -> None:
    setup = (REPO_ROOT / "scripts" / "setup.sh").read_text()
    assert "from client.examples import build_variants; build_variants()" in setup
    assert Path(REPO_ROOT / "scripts" / "build-example-images.sh").exists()
