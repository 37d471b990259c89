"""Shared Docker fixtures: engine, base / example / zoo images, listeners, a local registry.

Docker tests (``@pytest.mark.docker``) skip with a reason when no engine answers or the
base image cannot be built. Every Docker test is checked for leftovers: no container,
network or volume labelled for this test session may survive it, and at session end no
Dynaeval-managed object may exist that did not exist before.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ZOO = Path(__file__).resolve().parent / "zoo"
BASE_IMAGE = "dynaeval/python-base:latest"
TEST_LABEL = "dynaeval.test"
# Objects a Docker test makes itself carry TEST_LABEL=<this process>: with the suite spread
# over xdist workers, each worker removes and checks only its own.
TEST_LABELS = {TEST_LABEL: f"pytest-{os.getpid()}"}
MY_TEST_OBJECTS = f"{TEST_LABEL}={TEST_LABELS[TEST_LABEL]}"


def _skip_or_fail(reason: str) -> None:
    """Skip locally; fail where the engine is required (scripts/test.sh sets that in CI)."""
    if os.environ.get("DYNAEVAL_REQUIRE_DOCKER") == "1":
        pytest.fail(f"Docker is required here: {reason}")
    pytest.skip(reason)


def _docker_client():
    """A pinged client, or a sentence saying why there is none."""
    import docker

    # The SDK leaks its socket when the engine is absent; drop it here, not in a later test.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            client = docker.from_env(timeout=120)
            client.ping()
            return client
        except Exception as exc:  # any failure here means "no engine": skip, do not error
            reason = f"{type(exc).__name__}: {exc}"
        gc.collect()
    return reason


@pytest.fixture(scope="session")
def docker_client():
    """A client for the local engine; skips the test when none answers."""
    client = _docker_client()
    if isinstance(client, str):
        _skip_or_fail(f"no Docker engine answers ({client})")
    return client


@pytest.fixture(scope="session")
def owner() -> str:
    """The label owner of every sandbox this test session creates."""
    return f"pytest-{os.getpid()}"


@pytest.fixture(scope="session")
def base_image(docker_client) -> str:
    """The offline base image, built by scripts/build-base-image.sh (cached by content)."""
    script = REPO / "scripts" / "build-base-image.sh"
    result = subprocess.run([str(script)], capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        _skip_or_fail(f"base image missing and could not be built: {result.stderr[-500:]}")
    return BASE_IMAGE


@pytest.fixture(scope="session")
def example_image(base_image) -> Callable[[str], str]:
    """Build (cached) and return the tag of ``examples/models/<name>``'s image."""
    from client.examples import build_image, folder_entry
    from usecases.service import example_image

    built: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in built:
            entry = folder_entry(name)
            try:
                build_image(entry)
            except subprocess.CalledProcessError as exc:
                raise AssertionError(exc.stderr.decode(errors="replace")[-2000:]) from None
            built[name] = example_image(entry)
        return built[name]

    return get


@pytest.fixture(scope="session")
def zoo_image(docker_client, base_image) -> Callable[[str], str]:
    """Build (cached) and return the tag of ``tests/integration/zoo/<name>``'s image."""
    built: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in built:
            tag = f"dynaeval-zoo/{name}:latest"
            docker_client.images.build(
                path=str(ZOO),
                dockerfile=f"{name}/Dockerfile",
                tag=tag,
                rm=True,
                forcerm=True,
                network_mode="none",
            )
            built[name] = tag
        return built[name]

    return get


def _labelled(client, label: str) -> set[str]:
    # The low-level listings: docker-py's containers.list() inspects each container and
    # raises NotFound when another test's container vanishes in between.
    selector = {"label": label}
    found = {
        f"container {(c.get('Names') or [c['Id']])[0].lstrip('/')}"
        for c in client.api.containers(all=True, filters=selector)
    }
    found |= {f"network {n['Name']}" for n in client.api.networks(filters=selector)}
    volumes = client.api.volumes(filters=selector).get("Volumes") or []
    found |= {f"volume {v['Name']}" for v in volumes}
    return found


def _managed(client, owner: str) -> set[str]:
    return _labelled(client, f"dynaeval.owner={owner}") | _labelled(client, MY_TEST_OBJECTS)


@pytest.fixture(scope="session")
def _session_baseline(docker_client, owner: str) -> Iterator[None]:
    """This process's own objects are all gone at its end (what every process of the run
    left, serve's included, is checked once all are done: tests/conftest.py)."""
    before = _managed(docker_client, owner)
    yield
    new = _managed(docker_client, owner) - before
    assert not new, f"the Docker tests left objects behind: {sorted(new)}"


@pytest.fixture(autouse=True)
def _no_docker_leftovers(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each Docker test: nothing labelled for this session may remain."""
    if request.node.get_closest_marker("docker") is None:
        yield
        return
    client = request.getfixturevalue("docker_client")
    request.getfixturevalue("_session_baseline")
    owner = request.getfixturevalue("owner")
    yield
    from evaluator.runtimes.docker.objects import remove_container, remove_network
    from evaluator.runtimes.docker.sandbox import cleanup_leftovers

    mine = _managed(client, owner)
    cleanup_leftovers(owner, client)
    for container in client.api.containers(all=True, filters={"label": MY_TEST_OBJECTS}):
        remove_container(client, container["Id"])
    for network in client.api.networks(filters={"label": MY_TEST_OBJECTS}):
        remove_network(client, network["Id"])
    assert not mine, f"{request.node.name} left objects behind: {sorted(mine)}"


class Listener:
    """A TCP listener on the host (0.0.0.0, free port) that counts accepted connections."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture
def host_listener() -> Iterator[Listener]:
    """A listener the test owns on every host address."""
    listener = Listener()
    yield listener
    listener.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def registry(docker_client, tmp_path_factory) -> Iterator[str]:
    """Debian's docker-registry on 127.0.0.1 with a throwaway storage dir: ``host:port``."""
    binary = shutil.which("docker-registry")
    if binary is None:
        _skip_or_fail("docker-registry is not installed (scripts/ensure-docker.sh installs it)")
    root = tmp_path_factory.mktemp("registry")
    port = free_port()
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: error}\n"
        f"storage: {{filesystem: {{rootdirectory: {root / 'data'}}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: '127.0.0.1:{port}'}}\n"
    )
    log = root / "registry.log"
    with open(log, "wb") as log_handle:
        proc = subprocess.Popen(
            [binary, "serve", str(config)], stdout=log_handle, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"docker-registry did not start: {log.read_text()[-500:]}")
            time.sleep(0.05)
        from evaluator.runtimes.docker.references import allow_registries_for_pulls

        allow_registries_for_pulls(["127.0.0.1"])  # any port: test_pull_errors' "down" one too
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def labelled_copy(client, image: str, folder: Path) -> tuple[str, str]:
    """(tag, id) of ``image`` plus a unique label: an image no other test has, which a test
    may remove while others use ``image`` (the layers are shared, not copied)."""
    nonce = uuid.uuid4().hex
    context = folder / f"copy-{nonce}"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {image}\nLABEL dynaeval-test-nonce={nonce}\n")
    tag = f"dynaeval-test/copy-{nonce[:12]}:latest"
    built, _ = client.images.build(path=str(context), tag=tag, rm=True, pull=False)
    return tag, built.id


def remove_images(client, *images: str) -> None:
    """Remove test images by tag or id, ignoring ones already gone."""
    from docker.errors import APIError, ImageNotFound

    for image in images:
        with contextlib.suppress(ImageNotFound, APIError):
            client.images.remove(image, force=True)


STATEMENTS = ["great film", "awful plot", "it was fine", "loved it", "boring", "okay", "wow", "meh"]


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    """A tiny sentiment task (8 examples, batches of 4, no perturbations) in a config dir."""
    (tmp_path / "datasets").mkdir()
    (tmp_path / "tasks").mkdir()
    rows = [
        {"uid": f"z-{i}", "statement": text, "label": ("positive", "negative", "neutral")[i % 3]}
        for i, text in enumerate(STATEMENTS)
    ]
    (tmp_path / "datasets" / "zoo.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "tasks" / "zoo.yaml").write_text(
        "name: zoo\nversion: 1\ninput_fields: [statement]\n"
        "output: {type: label, labels: [positive, negative, neutral]}\n"
        "metric: accuracy\nbatch_size: 4\nweights: {performance: 1}\n"
        "profiling: {warmup_batches: 1, min_examples: 8, sample_interval_s: 0.05,"
        " min_queries: 4, min_duration_s: 0.01}\n"
        "bootstrap: {n_resamples: 50, seed: 0}\n"
        "rounds:\n  - {name: r1, datasets: [{name: test, path: datasets/zoo.jsonl}]}\n"
    )
    return tmp_path
