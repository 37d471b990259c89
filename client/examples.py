"""Choosing how the example models run: containers where a Docker engine answers."""

from __future__ import annotations

import logging
import subprocess
import threading

from api.service import Service, example_catalog, example_image
from configs.paths import REPO_ROOT

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


def build_example_images() -> bool:
    """Build the base image, the example images and the catalog's per-task variants (all
    cached by Docker); False when that fails."""
    script = REPO_ROOT / "scripts" / "build-example-images.sh"
    try:
        # Output only matters when a build fails: it is then in the exception's stderr.
        subprocess.run(["bash", str(script)], check=True, timeout=1800, capture_output=True)
        for entry in example_catalog():
            if entry.get("args"):
                build_variant(entry)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        log.warning(
            "could not build the example images (%s); using local processes\n%s",
            exc,
            detail.decode("utf-8", "replace")[-2000:],
        )
        return False
    return True


def build_variant(entry: dict) -> None:
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
    """Build the images if containers are possible, then queue every example model."""
    try:
        kind = example_runtime_kind(choice)
    except RuntimeError as exc:  # asked for docker and the build failed: queue nothing
        print(f"not queueing the example models: {exc}", flush=True)
        return []
    ids = service.queue_examples(kind)
    print(f"queued {len(ids)} example models ({kind} runtime)", flush=True)
    return ids


def queue_examples_in_background(service: Service, choice: str) -> threading.Thread:
    """:func:`queue_examples` on a daemon thread, so the server answers meanwhile (a
    daemon, because Ctrl-C must not wait for a half-done image build)."""

    def run() -> None:
        try:
            queue_examples(service, choice)
        except Exception:  # the server keeps serving; the log says why the examples are missing
            log.exception("could not queue the example models")

    thread = threading.Thread(target=run, name="dynaeval-examples", daemon=True)
    thread.start()
    return thread
