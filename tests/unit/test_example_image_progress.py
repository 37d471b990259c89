"""Set-up builds every image a first ``serve`` needs (the catalog's, the per-task baselines
included), two at a time, and says each as it is done."""

from __future__ import annotations

from typing import Any

import pytest

import client.examples as examples
from configs.paths import REPO_ROOT
from usecases.service import example_catalog, example_image


def catalog_images() -> list[str]:
    return list(dict.fromkeys(examples.example_image(e) for e in examples.example_catalog()))


def no_base_image(cmd: list[str]) -> Any:
    """What ``docker image inspect`` answers when the base image was never built."""
    return examples.subprocess.CompletedProcess(cmd, 1)


def test_the_build_says_what_it_waits_for(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[list[str]] = []

    def run(cmd: list[str], **_: Any) -> Any:
        if cmd[1:3] == ["image", "inspect"]:
            return no_base_image(cmd)
        ran.append(list(cmd))
        return None

    monkeypatch.setattr(examples.subprocess, "run", run)
    lines: list[str] = []
    assert examples.build_catalog_images(progress=lines.append)
    images = catalog_images()
    assert any(e.get("args") for e in examples.example_catalog()), "per-task baselines"
    assert "the base image" in lines[0] and ran[0][-1].endswith("build-base-image.sh")
    assert lines[1] == f"building {len(images)} example model images, 2 at a time"
    said = {line.split(" (")[0].removeprefix("built ") for line in lines[2:]}
    assert said == set(images)
    assert sorted(int(line.split("(")[1].split("/")[0]) for line in lines[2:]) == list(
        range(1, len(images) + 1)
    )
    built = {cmd[cmd.index("-t") + 1] for cmd in ran[1:]}
    assert built == set(images) and len(ran) == 1 + len(images)
    assert (
        ran[1][ran[1].index("-t") + 1] == images[0]
    )  # the first alone: it builds the shared steps


def test_a_baseline_bakes_its_answer_in() -> None:
    entry = next(e for e in examples.example_catalog() if e.get("args"))
    command = examples.build_command(entry)
    assert command[command.index("--build-arg") + 1] == "MAJORITY_ARGS=" + " ".join(
        map(str, entry["args"])
    )
    assert command[command.index("--network") + 1] == "none"
    plain = next(e for e in examples.example_catalog() if not e.get("args"))
    assert "--build-arg" not in examples.build_command(plain)


@pytest.mark.parametrize("fails", ["build-base-image.sh", "dynaeval-example/"])
def test_a_failed_build_is_said_and_reported(monkeypatch: pytest.MonkeyPatch, fails: str) -> None:
    def run(cmd: Any, **_: Any) -> Any:
        if cmd[1:3] == ["image", "inspect"]:
            return no_base_image(cmd)
        if any(fails in part for part in cmd):
            raise examples.subprocess.CalledProcessError(1, cmd, stderr=b"step 3\nno space left")

    monkeypatch.setattr(examples.subprocess, "run", run)
    lines: list[str] = []
    assert examples.build_catalog_images(progress=lines.append) is False
    assert any(line.startswith("could not build") and "no space left" in line for line in lines)
    if fails == "dynaeval-example/":  # the build's own output follows, indented
        assert "  step 3" in lines and "  no space left" in lines


def test_setup_builds_every_image_serve_needs() -> None:
    setup = (REPO_ROOT / "scripts" / "setup.sh").read_text()
    assert '"$PYTHON" -m client.examples' in setup and "--every-folder" in setup


def test_every_folder_adds_each_example_folders_own_image(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests' images (each folder's own, no build arguments) build beside the catalog's,
    by the same builder, each once."""
    built: list[list[str]] = []

    def run(cmd: list[str], **_: Any) -> Any:
        built.append(list(cmd))
        return examples.subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(examples.subprocess, "run", run)
    assert examples.main(["--every-folder"]) == 0
    tags = [cmd[cmd.index("-t") + 1] for cmd in built if cmd[:2] == ["docker", "build"]]
    folders = examples.example_folders()
    assert {"null", "majority", "vqa_shapes"} <= set(folders)
    assert set(tags) == {example_image(e) for e in example_catalog()} | {
        f"dynaeval-example/{folder}:latest" for folder in folders
    }
    assert len(tags) == len(set(tags))
    with pytest.raises(ValueError, match="no Dockerfile"):
        examples.folder_entry("no-such-model")


def test_named_folders_build_beside_the_catalog_and_an_unknown_one_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    built: list[str] = []

    def run(cmd: list[str], **_: Any) -> Any:
        if cmd[:2] == ["docker", "build"]:
            built.append(cmd[cmd.index("-t") + 1])
        return examples.subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(examples.subprocess, "run", run)
    assert examples.main(["null", "cpu_1ms"]) == 0
    assert set(built) == {example_image(e) for e in example_catalog()} | {
        "dynaeval-example/null:latest",
        "dynaeval-example/cpu_1ms:latest",
    }
    built.clear()
    with pytest.raises(SystemExit) as refused:
        examples.main(["no-such-model"])
    assert refused.value.code == 2 and built == []
    assert "no Dockerfile in examples/models/no-such-model" in capsys.readouterr().err


def test_a_base_image_built_earlier_is_used_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """serve never rebuilds a base image set-up built (that would need a Debian mirror)."""
    ran: list[list[str]] = []

    def run(cmd: list[str], **_: Any) -> Any:
        ran.append(list(cmd))
        return examples.subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(examples.subprocess, "run", run)
    examples.build_base_image()
    assert ran == [["docker", "image", "inspect", examples.BASE_IMAGE]]
