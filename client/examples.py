"""Choosing how the example models run: containers where a Docker engine answers."""

from __future__ import annotations

import logging
import subprocess
import threading
from collections.abc import Callable
from typing import Any

from configs.paths import REPO_ROOT
from usecases.service import Service, example_catalog, example_image, example_runtime

log = logging.getLogger(__name__)


def docker_answers() -> bool:
    """Whether a Docker engine answers on this machine (bounded wait)."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        client.ping()
        client.close()
        return True
    except Exception:  # no SDK, no socket, no permission: all mean "no engine"
        return False


def _say(line: str) -> None:
    print(f"[examples] {line}", flush=True)


def build_example_images(progress: Callable[[str], None] = _say) -> bool:
    """Build the base image, the example images and the catalog's per-task variants (all
    cached by Docker, so a second start takes seconds), saying what it waits for; False
    when that fails."""
    script = REPO_ROOT / "scripts" / "build-example-images.sh"
    variants = [entry for entry in example_catalog() if entry.get("args")]
    try:
        progress(
            "building the example model images (cached by Docker: the first time takes a "
            "minute or two; scripts/setup.sh --docker builds them ahead)"
        )
        # Output only matters when a build fails: it is then in the exception's stderr.
        subprocess.run(["bash", str(script)], check=True, timeout=1800, capture_output=True)
        for number, entry in enumerate(variants, start=1):
            progress(f"building {example_image(entry)} ({number}/{len(variants)})")
            build_variant(entry)
        progress("example model images ready")
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        log.warning(
            "could not build the example images (%s); using local processes\n%s",
            exc,
            detail.decode("utf-8", "replace")[-2000:],
        )
        return False
    return True


def build_variants() -> None:
    """The catalog's per-task variants (``scripts/setup.sh --docker`` runs this after the
    example images, so ``serve`` finds every image it needs already built)."""
    for entry in example_catalog():
        if entry.get("args"):
            build_variant(entry)


def build_variant(entry: dict[str, Any]) -> None:
    """An example whose answer is fixed by arguments (the majority baselines), baked in."""
    models = REPO_ROOT / "examples" / "models"
    args = " ".join(map(str, entry["args"]))
    command = [
        "docker",
        "build",
        "--quiet",
        "--network",
        "none",
        "--build-arg",
        f"MAJORITY_ARGS={args}",
        "-f",
        str(models / entry["dir"] / "Dockerfile"),
        "-t",
        example_image(entry),
        str(models),
    ]
    subprocess.run(command, check=True, timeout=600, capture_output=True)


def example_runtime_kind(choice: str) -> str:
    """``docker`` when asked or (auto) when an engine answers and the images build."""
    if choice == "process":
        return "process"
    if docker_answers() and build_example_images():
        return "docker"
    if choice == "docker":
        raise RuntimeError("no Docker engine answers, or the example images did not build")
    return "process"


def check_example_runtime(choice: str) -> None:
    """Refuse ``docker`` at once when no engine answers (the build itself comes later)."""
    if choice == "docker" and not docker_answers():
        raise RuntimeError("--example-runtime docker: no Docker engine answers")


def queue_examples(service: Service, choice: str) -> list[str]:
    """Show every example model as queued at once, build the images if containers are
    possible, then let the workers take them (as containers or as local processes)."""
    return start_examples(service, service.hold_examples(), choice)


def start_examples(service: Service, held: dict[str, dict[str, Any]], choice: str) -> list[str]:
    """Release the ``held`` examples with the runtime the build allows; if docker was asked
    for and cannot be had, remove them again (nothing half-queued stays behind)."""
    try:
        kind = example_runtime_kind(choice)
    except RuntimeError as exc:  # asked for docker and the build failed: queue nothing
        for model_id in held:
            service.store.discard_held(model_id)
        print(f"not queueing the example models: {exc}", flush=True)
        return []
    started = [
        model_id
        for model_id, entry in held.items()
        if service.store.start_held(model_id, example_runtime(entry, kind))
    ]
    print(f"queued {len(started)} example models ({kind} runtime)", flush=True)
    return started


def queue_examples_in_background(service: Service, choice: str) -> threading.Thread:
    """Hold every example model now (the pages show them as queued from the first second),
    then build and release them on a daemon thread, so the server answers meanwhile (a
    daemon, because Ctrl-C must not wait for a half-done image build)."""
    held = service.hold_examples()

    def run() -> None:
        try:
            start_examples(service, held, choice)
        except Exception:  # the server keeps serving; the log says why the examples are missing
            log.exception("could not queue the example models")

    thread = threading.Thread(target=run, name="dynaeval-examples", daemon=True)
    thread.start()
    return thread
