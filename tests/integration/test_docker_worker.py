"""The worker with real containers: hostile jobs fail with their codes, the next job is
scored, nothing is left behind, and a restarted worker removes its predecessor's leftovers."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.service import Service
from configs.schema import Limits
from evaluator.runtimes.docker.runtime import DockerRuntime
from worker.worker import Worker

pytestmark = pytest.mark.docker


def managed(client, owner: str) -> list[str]:
    label = f"dynaeval.owner={owner}"
    containers = client.containers.list(all=True, filters={"label": label})
    networks = client.networks.list(filters={"label": label})
    return [c.name for c in containers] + [n.name for n in networks]


def test_the_worker_goes_on_after_hostile_containers(
    task_dir: Path, tmp_path: Path, zoo_image, example_image, owner: str, docker_client
) -> None:
    service = Service.open(tmp_path / "data", config_dir=task_dir)
    try:
        jobs = {}
        for name, image in (
            ("crasher", zoo_image("crash_midrun")),
            ("hog", zoo_image("memory_hog")),
            ("lexicon", example_image("sentiment_lexicon")),
        ):
            spec = {"kind": "docker", "image": image, "protocol": "v1"}
            jobs[name], _ = service.store.submit("zoo", name, spec)
        worker = Worker(
            service.store, service.blobs, service.tasks, worker_id=owner, config_dir=task_dir
        )
        stats = worker.work(burst=True)
        assert (stats.done, stats.failed) == (1, 2)
        outcome = {name: service.queries.submission(i)["job"] for name, i in jobs.items()}
        assert outcome["crasher"]["failure"]["code"] == "crashed"
        assert outcome["crasher"]["failure"]["log_tail"]
        assert outcome["hog"]["failure"]["code"] == "oom_killed"
        assert outcome["lexicon"]["status"] == "done"
        scored = service.queries.submission(jobs["lexicon"])
        assert scored["image_id"].startswith("sha256:")  # pinned to what was run
        assert scored["results"]["provenance"]["runtime"]["user"] == "10001:10001"
        assert managed(docker_client, owner) == []
    finally:
        service.close()


def test_a_restarted_worker_removes_what_its_predecessor_left(
    task_dir: Path, tmp_path: Path, example_image, owner: str, docker_client
) -> None:
    orphan = DockerRuntime(example_image("null"), Limits(), label_owner=owner)
    orphan.start()  # its worker "died" here: never stopped
    assert managed(docker_client, owner)
    service = Service.open(tmp_path / "data", config_dir=task_dir)
    try:
        Worker(service.store, service.blobs, service.tasks, worker_id=owner).work(burst=True)
        assert managed(docker_client, owner) == []
    finally:
        service.close()
        orphan.stop()
