"""Docker runtime sources end to end: ``registry`` always pulls from the (local) registry
and refuses paths and image IDs; images a job loaded or pulled are removed after its run,
images that were there before (base, examples) are kept."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker.errors import ImageNotFound
from docker.models.images import ImageCollection

from configs.schema import Limits
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.runtimes.factory import make_runtime
from store.blobs import LocalBlobStore
from tests.integration.conftest import BASE_IMAGE, labelled_copy, remove_images
from tests.integration.test_docker_sandbox import wait_http
from usecases.service import Service
from worker.worker import Worker

pytestmark = pytest.mark.docker

LIMITS = Limits(memory_gib=0.25, cpus=0.5, pids=48, tmpfs_mib=8, startup_s=30)
EXAMPLE = "sentiment_lexicon"


def present(client, image: str) -> bool:
    try:
        client.images.get(image)
    except ImageNotFound:
        return False
    return True


@pytest.fixture
def unique_image(docker_client, example_image, tmp_path) -> Iterator[tuple[str, str]]:
    """(tag, id) of a runnable image no other test has: the example plus a unique label."""
    tag, image_id = labelled_copy(docker_client, example_image(EXAMPLE), tmp_path)
    yield tag, image_id
    remove_images(docker_client, tag, image_id)


def push(client, image_id: str, registry: str, name: str) -> str:
    """Push ``image_id`` as ``registry/name:1`` and drop that local tag again."""
    reference = f"{registry}/{name}:1"
    client.images.get(image_id).tag(reference)
    try:
        for line in client.images.push(f"{registry}/{name}", tag="1", stream=True, decode=True):
            assert "error" not in line, line
    finally:
        remove_images(client, reference)
    return reference


def test_registry_source_pulls_runs_and_removes(
    docker_client, unique_image, example_image, registry, owner, tmp_path
):
    """The registry's image runs even when a local image carries the same name, then goes."""
    tag, image_id = unique_image
    reference = push(docker_client, image_id, registry, "unique")
    remove_images(docker_client, tag, image_id)
    example_id = docker_client.images.get(example_image(EXAMPLE)).id
    docker_client.images.get(example_id).tag(reference)  # a local impostor of the same name
    try:
        spec = {"kind": "docker", "source": "registry", "image": reference, "protocol": "v1"}
        runtime = make_runtime(spec, LIMITS, LocalBlobStore(tmp_path / "blobs"), owner=owner)
        assert runtime.image == image_id and runtime.remove_image_on_stop
        try:
            endpoint = runtime.start()
            assert wait_http(endpoint.host, endpoint.port) == 200
        finally:
            runtime.stop()
        assert runtime.image_removed and not present(docker_client, image_id)
        assert docker_client.images.get(reference).id == example_id
        assert present(docker_client, example_image(EXAMPLE)) and present(docker_client, BASE_IMAGE)
    finally:
        remove_images(docker_client, reference)


def test_registry_source_refuses_paths_and_image_ids(
    docker_client, example_image, tmp_path, monkeypatch
):
    (tmp_path / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\n")
    blobs = LocalBlobStore(tmp_path / "blobs")
    blobs.put_bytes("uploads/other.tar", b"someone else's upload")
    example_id = docker_client.images.get(example_image(EXAMPLE)).id
    # Nothing may be built, loaded, looked up or pulled: any such call fails the test. (Comparing the
    # engine's image list before and after cannot tell: tests beside this one build images.)
    calls: list[str] = []
    for verb in ("build", "load", "pull", "get_registry_data"):
        monkeypatch.setattr(ImageCollection, verb, _refused(verb, calls))
    for image in (str(tmp_path), str(blobs.local_path("uploads/other.tar")), example_id, "~/m"):
        spec = {"kind": "docker", "source": "registry", "image": image}
        with pytest.raises(ValueError):
            make_runtime(spec, LIMITS, blobs)
    assert calls == []


def _refused(verb: str, calls: list[str]):
    def refuse(*args, **kwargs):
        calls.append(verb)
        raise AssertionError(f"images.{verb} was called")

    return refuse


def test_uploaded_images_are_removed_after_the_run(
    docker_client, unique_image, example_image, task_dir: Path, tmp_path, owner
):
    """Kept when it was in the engine before the job; removed with its tag when the job
    loaded it; the base and example images stay."""
    tag, image_id = unique_image
    tarball = tmp_path / "upload.tar"
    subprocess.run(["docker", "save", "-o", str(tarball), tag], check=True)
    service = Service.open(tmp_path / "data", config_dir=task_dir)
    try:
        key = "uploads/upload.tar"
        with tarball.open("rb") as handle:
            service.blobs.put_file(key, handle)
        spec = {"kind": "docker", "source": "upload", "blob": key, "image": "upload.tar"}
        worker = Worker(
            service.store, service.blobs, service.tasks, worker_id=owner, config_dir=task_dir
        )
        kept, _ = service.store.submit("zoo", "kept", {**spec, "protocol": "v1"})
        assert worker.work(burst=True).done == 1
        assert docker_client.images.get(tag).id == image_id  # was here before the job

        remove_images(docker_client, tag, image_id)
        removed, _ = service.store.submit("zoo", "removed", {**spec, "protocol": "v1"})
        assert worker.work(burst=True).done == 2
        for model_id in (kept, removed):
            assert service.queries.submission(model_id)["job"]["status"] == "done"
        assert service.queries.submission(removed)["image_id"] == image_id
        assert not present(docker_client, image_id) and not present(docker_client, tag)
        assert present(docker_client, example_image(EXAMPLE)) and present(docker_client, BASE_IMAGE)
    finally:
        service.close()


def test_an_image_removed_by_another_job_is_a_platform_fault_not_the_submitters(
    docker_client, unique_image, tmp_path, owner
):
    """Two jobs of one upload on one engine: the first loads it and removes it when done;
    the second, which found it already loaded, must be retried, not failed for good."""
    tag, image_id = unique_image
    tarball = tmp_path / "upload.tar"
    subprocess.run(["docker", "save", "-o", str(tarball), tag], check=True)
    remove_images(docker_client, tag, image_id)
    blobs = LocalBlobStore(tmp_path / "blobs")
    with tarball.open("rb") as handle:
        blobs.put_file("uploads/upload.tar", handle)
    spec = {"kind": "docker", "source": "upload", "blob": "uploads/upload.tar", "protocol": "v1"}
    first = make_runtime(spec, LIMITS, blobs, owner=owner)
    second = make_runtime(spec, LIMITS, blobs, owner=owner)  # finds it loaded: not its own
    first.start()
    first.stop()
    assert not present(docker_client, image_id)
    with pytest.raises(EvaluationError) as exc_info:
        second.start()
    assert exc_info.value.code == FailureCode.PLATFORM_ERROR
    second.stop()
