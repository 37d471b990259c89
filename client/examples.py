"""Choosing how the example models run (containers where a Docker engine answers), and
building their images on a first start, each model queued as soon as its image exists."""

from __future__ import annotations

import argparse
import logging
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from configs.paths import REPO_ROOT
from configs.vocabulary.jobs import JobStatus
from store.outages import DATABASE_OUTAGES
from usecases.service import Service, example_catalog, example_image, example_runtime

log = logging.getLogger(__name__)

# Images built at once. A build is mostly the engine committing layers, which waits on the
# storage driver as much as on a core: two at a time on two cores about halves a cold
# first start's building, and a third only queues behind them.
BUILDERS = 2
BUILD_TIMEOUT_S = 600
BASE_IMAGE = "dynaeval/python-base:latest"  # every example Dockerfile's FROM
MODELS = REPO_ROOT / "examples" / "models"
BUILD_OUTPUT_LINES = 30  # of a failed build, shown under set-up's line for it
RELEASE_RETRY_S = 2.0  # a release that met a database outage is tried again this much later

Entry = dict[str, Any]
Held = dict[str, Entry]  # model id -> its catalog entry (usecases.service.hold_examples)
# what a start tells its follower of each held model: (model id, released), None when done
Releases = queue.SimpleQueue[tuple[str, bool] | None]


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


def build_command(entry: Entry) -> list[str]:
    """``docker build`` for one catalog entry's image (or a folder's, ``folder_entry``); an
    entry with ``args`` (the majority baselines) bakes them in as its answer."""
    command = ["docker", "build", "--quiet", "--network", "none"]  # nothing downloads
    if entry.get("args"):
        command += ["--build-arg", "MAJORITY_ARGS=" + " ".join(map(str, entry["args"]))]
    dockerfile = MODELS / entry["dir"] / "Dockerfile"
    # the context is every example's folder: each image copies the shared dynaeval_server.py
    return [*command, "-f", str(dockerfile), "-t", example_image(entry), str(MODELS)]


def folder_entry(directory: str) -> Entry:
    """``examples/models/<directory>`` as an entry of its own, built without arguments as
    ``dynaeval-example/<directory>:latest`` (the images tests and benchmarks run)."""
    if not (MODELS / directory / "Dockerfile").is_file():
        raise ValueError(f"no Dockerfile in {MODELS / directory}")
    return {"dir": directory}


def example_folders() -> list[str]:
    """Every folder under ``examples/models`` with a Dockerfile, by name."""
    return sorted(path.parent.name for path in MODELS.glob("*/Dockerfile"))


def build_image(entry: Entry) -> None:
    """Build one catalog entry's image (Docker's cache makes a rebuild take a moment)."""
    subprocess.run(build_command(entry), check=True, timeout=BUILD_TIMEOUT_S, capture_output=True)


def build_base_image() -> None:
    """The base every example image starts from, built only when there is none: an image
    set-up built earlier is used as it is (rebuilding it needs a Debian mirror)."""
    listed = subprocess.run(
        ["docker", "image", "inspect", BASE_IMAGE], capture_output=True, timeout=60, check=False
    )
    if listed.returncode == 0:
        return
    script = REPO_ROOT / "scripts" / "build-base-image.sh"
    subprocess.run(["bash", str(script)], check=True, timeout=1800, capture_output=True)


def check_example_runtime(choice: str) -> None:
    """Refuse ``docker`` at once when no engine answers (the build itself comes later)."""
    if choice == "docker" and not docker_answers():
        raise RuntimeError("--example-runtime docker: no Docker engine answers")


def queue_examples(service: Service, choice: str) -> list[str]:
    """Show every example model as queued at once, then let the workers take each one as
    its image is built (as a container, or as a local process when containers cannot be
    had)."""
    return start_examples(service, service.hold_examples(), choice)


def start_examples(
    service: Service,
    held: Held,
    choice: str,
    progress: Callable[[str], None] = _say,
    releases: Releases | None = None,
) -> list[str]:
    """Release the ``held`` examples with the runtime each can have; those that can have
    none (``docker`` asked for and not possible) are removed again, so nothing half-queued
    stays behind. Each is put on ``releases`` as it is released or removed (a follower says
    each as it is scored meanwhile). Returns the ids of the models released."""
    told = releases or queue.SimpleQueue()
    if choice != "process":
        reason = _containers_unavailable(progress)
        if reason is None:
            return _release_as_built(service, held, choice, progress, told)
        if choice == "docker":
            for model_id, entry in held.items():
                told.put((model_id, _release(service, model_id, entry, None)))
            print(f"not queueing the example models: {reason}", flush=True)
            return []
        log.warning("the example models run as local processes: %s", reason)
    started = []
    for model_id, entry in held.items():
        released = _release(service, model_id, entry)
        told.put((model_id, released))
        started += [model_id] if released else []
    print(f"queued {len(started)} example models (process runtime)", flush=True)
    return started


def _containers_unavailable(progress: Callable[[str], None]) -> str | None:
    """Why the examples cannot run as containers here, or None when the base image is
    built and an engine answers."""
    if not docker_answers():
        return "no Docker engine answers"
    return _base_image_unavailable(progress)


def _base_image_unavailable(progress: Callable[[str], None]) -> str | None:
    """Build the base image when there is none, saying so; why it did not build, or None."""
    progress("checking the base image (built from Debian packages the first time: a minute or two)")
    try:
        build_base_image()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the base image did not build ({_why(exc)})"
    return None


def _release_as_built(
    service: Service, held: Held, choice: str, progress: Callable[[str], None], told: Releases
) -> list[str]:
    """Build the images the held models need, ``BUILDERS`` at a time in catalog order, and
    release each image's models the moment it is built, so the worker evaluates the first
    while the next ones build. An image that fails leaves its models to local processes
    (``auto``) or removes them (``docker``)."""
    waiting: dict[str, list[tuple[str, Entry]]] = {}
    for model_id, entry in held.items():
        waiting.setdefault(example_image(entry), []).append((model_id, entry))
    progress(
        f"building {len(waiting)} example model images, {BUILDERS} at a time (cached by "
        "Docker after the first start); each model is queued as soon as its image is built"
    )
    started: list[str] = []
    by_kind = {"docker": 0, "process": 0}
    builds = [(image, models[0][1]) for image, models in waiting.items()]
    for number, (image, failure) in enumerate(_built_as_they_finish(builds), start=1):
        kind = "docker" if failure is None else None if choice == "docker" else "process"
        released = []
        for model_id, entry in waiting[image]:
            went = _release_through_outages(service, model_id, entry, kind)
            told.put((model_id, went))
            released += [(model_id, entry)] if went else []
        started += [model_id for model_id, _ in released]
        if kind is not None:
            by_kind[kind] += len(released)
        where = f"{image} ({number}/{len(waiting)})"
        if kind is None and failure is not None:
            names = ", ".join(f"{e['task']}/{e['name']}" for _, e in waiting[image])
            progress(f"could not build {where}: {_why(failure)}; {names} not queued")
            continue
        names = ", ".join(f"{e['task']}/{e['name']}" for _, e in released) or "none (cancelled)"
        if failure is None:
            progress(f"built {where}: queued {names}")
        else:
            progress(f"could not build {where}: {_why(failure)}; {names} run as processes")
    print(f"queued {len(started)} example models ({_runtimes(by_kind)})", flush=True)
    return started


def _runtimes(by_kind: dict[str, int]) -> str:
    """How the released examples run, as the summary line says it (scripts read it)."""
    if not by_kind["process"]:
        return "docker runtime"
    if not by_kind["docker"]:
        return "process runtime: no image built"
    return f"docker runtime, {by_kind['process']} as local processes"


def _release_through_outages(
    service: Service, model_id: str, entry: Entry, kind: str | None
) -> bool:
    """``_release``, tried again while the database is out (a model left held would stay
    listed as queued and never run); False when it had nothing to release."""
    while True:
        try:
            return _release(service, model_id, entry, kind)
        except DATABASE_OUTAGES:
            log.warning("the database is out: %s is released when it is back", entry["name"])
            time.sleep(RELEASE_RETRY_S)


def _built_as_they_finish(
    builds: list[tuple[str, Entry]],
) -> Iterator[tuple[str, BaseException | None]]:
    """Build each ``(image, entry)`` in order and yield ``(image, failure or None)`` as each
    finishes: the first alone (it builds the steps every example shares, which the others
    then find cached), the rest on ``BUILDERS`` threads. Daemon threads, because Ctrl-C
    must not wait for a half-done build (an executor's threads are joined at exit)."""
    todo: queue.SimpleQueue[tuple[str, Entry]] = queue.SimpleQueue()
    finished: queue.SimpleQueue[tuple[str, BaseException | None]] = queue.SimpleQueue()
    for build in builds:
        todo.put(build)

    def work() -> None:
        while True:
            try:
                image, entry = todo.get_nowait()
            except queue.Empty:
                return
            try:
                build_image(entry)
                finished.put((image, None))
            except Exception as exc:  # said by the caller; the other builds go on
                finished.put((image, exc))

    def start(builders: int) -> None:
        for _ in range(builders):
            threading.Thread(target=work, name="dynaeval-image-build", daemon=True).start()

    if not builds:
        return
    start(1)
    yield finished.get()
    start(BUILDERS - 1)
    for _ in builds[1:]:
        yield finished.get()


def build_catalog_images(
    progress: Callable[[str], None] = _say, folders: list[str] | None = None
) -> bool:
    """Build the image of every model in the catalog, the base first (``scripts/setup.sh``
    runs this, so a first ``serve`` finds them all built), then each of ``folders``' own
    (``folder_entry``), saying each as it is done; False when one does not build."""
    images = {example_image(entry): entry for entry in example_catalog()}
    for directory in folders or []:
        entry = folder_entry(directory)
        images.setdefault(example_image(entry), entry)
    reason = _base_image_unavailable(progress)
    if reason is not None:
        progress(f"could not build the example images: {reason}")
        return False
    progress(f"building {len(images)} example model images, {BUILDERS} at a time")
    built = True
    for number, (image, failure) in enumerate(_built_as_they_finish([*images.items()]), 1):
        if failure is None:
            progress(f"built {image} ({number}/{len(images)})")
        else:
            progress(f"could not build {image}: {_why(failure)}")
            for line in _build_output(failure)[-BUILD_OUTPUT_LINES:]:
                progress(f"  {line}")
            built = False
    return built


def _release(service: Service, model_id: str, entry: Entry, kind: str | None = "process") -> bool:
    """Let the workers take one held example (``kind`` None: remove it instead)."""
    if kind is None:
        service.store.discard_held(model_id)
        return False
    return service.store.start_held(model_id, example_runtime(entry, kind))


def _why(exc: BaseException) -> str:
    """The end of a failed build's output (the engine says why there), or the error."""
    lines = _build_output(exc)
    return lines[-1][:300] if lines else str(exc)


def _build_output(exc: BaseException) -> list[str]:
    """The lines a failed ``docker build`` wrote (its output, then its error output)."""
    text = ""
    for stream in ("stdout", "stderr"):
        detail = getattr(exc, stream, b"") or b""
        text += detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
        text += "\n"
    return [line for line in text.strip().splitlines() if line.strip()]


def follow_examples(
    service: Service,
    held: Held,
    releases: Releases,
    progress: Callable[[str], None] = _say,
    every_s: float = 1.0,
    wait: Callable[[float], bool | None] = time.sleep,
) -> None:
    """Say each example as it is scored or fails, from the first released on (``releases``,
    while the others' images still build), then that every one is done, so a first start's
    console tells what it still waits for (until ``wait`` returns True: a stop was asked
    for). A count (n/N) is of the examples still meant to run: a removed one leaves it."""
    pending: list[str] = []
    expected, released, finished, scored = len(held), 0, 0, 0
    releasing = True
    while True:
        while releasing:  # what the start released or removed since the last look
            try:
                told = releases.get_nowait()
            except queue.Empty:
                break
            if told is None:  # a start that failed half-way told nothing of the rest
                releasing, expected = False, released
            elif told[1]:
                pending.append(told[0])
                released += 1
            else:
                expected -= 1
        if not releasing and not pending:
            break
        if wait(every_s):
            return
        for model_id in list(pending):
            try:
                shown = service.queries.submission(model_id)
            except DATABASE_OUTAGES:  # the next look tries again
                break
            job = shown["job"] if shown is not None else None
            if job is not None and not JobStatus(job["status"]).final:
                continue
            pending.remove(model_id)
            finished += 1
            scored += job is not None and job["failure"] is None
            progress(_outcome(held[model_id], job, f"({finished}/{expected})"))
    if finished:
        progress(f"every example model evaluated: {scored} of {finished} scored")


def _outcome(entry: Entry, job: dict[str, Any] | None, count: str) -> str:
    """The console's line for one example that has ended (``job`` None: it was removed)."""
    where = f"{entry['task']}/{entry['name']} {count}"
    if job is None:
        return f"{where} was removed"
    failure = job["failure"]
    if failure is None:
        return f"scored {where}"
    return f"{where} failed: {failure['code']}: {failure['message']}"


def _follow_quietly(
    service: Service, held: Held, releases: Releases, stop: threading.Event
) -> None:
    """``follow_examples`` until ``stop``; a failure is logged (the server goes on)."""
    try:
        follow_examples(service, held, releases, wait=stop.wait)
    except Exception:
        log.exception("could not follow the example models")


def queue_examples_in_background(
    service: Service, choice: str, stop: threading.Event | None = None, held: Held | None = None
) -> threading.Thread:
    """Hold every example model now (the pages show them as queued from the first second),
    or take ``held``, those an earlier start held and never released; then build and
    release them on a daemon thread, so the server answers meanwhile (a daemon, because
    Ctrl-C must not wait for a half-done image build), and say each as it is evaluated,
    from the first on, until ``stop`` is set."""
    held = held if held is not None else service.hold_examples()
    stop = stop or threading.Event()

    def run() -> None:
        releases: Releases = queue.SimpleQueue()
        follower = threading.Thread(
            target=_follow_quietly, args=(service, held, releases, stop), daemon=True
        )
        follower.start()
        try:
            start_examples(service, held, choice, releases=releases)
        except Exception:  # the server keeps serving; the log says why the examples are missing
            log.exception("could not queue the example models")
        finally:
            releases.put(None)
        follower.join()

    thread = threading.Thread(target=run, name="dynaeval-examples", daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> int:
    """``python -m client.examples [--every-folder | FOLDER ...]`` (``scripts/setup.sh``)."""
    parser = argparse.ArgumentParser(
        prog="python -m client.examples",
        description="Build every image a first `dynaeval serve` needs (cached by Docker).",
    )
    parser.add_argument(
        "--every-folder",
        action="store_true",
        help="also each examples/models folder's own image (what the tests and benchmarks run)",
    )
    parser.add_argument(
        "folders", nargs="*", metavar="FOLDER", help="also these examples/models folders' own"
    )
    args = parser.parse_args(argv)
    folders = example_folders() if args.every_folder else args.folders
    unknown = [name for name in folders if name not in example_folders()]
    if unknown:
        parser.error(f"no Dockerfile in examples/models/{unknown[0]}")
    built = build_catalog_images(lambda line: print(f"[setup] {line}", flush=True), folders)
    return 0 if built else 1


if __name__ == "__main__":
    raise SystemExit(main())
