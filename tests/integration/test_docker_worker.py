"""The worker with real containers: hostile jobs fail with their codes, the next job is
scored, nothing is left behind, and a restarted worker removes its predecessor's leftovers."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from configs.schema import Limits
from configs.vocabulary.jobs import RetryPolicy
from evaluator.runtimes.docker.runtime import DockerRuntime
from usecases.service import Service
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


def _kill_the_first_model(client, owner: str, killed: list[str], stop: threading.Event) -> None:
    """``docker kill`` the first running model container of ``owner``'s runs, once."""
    filters = {"label": [f"dynaeval.owner={owner}", "dynaeval.role=model"], "status": "running"}
    while not stop.is_set() and not killed:
        for container in client.api.containers(filters=filters):
            client.api.kill(container["Id"])
            killed.append(container["Id"])
            return
        stop.wait(0.02)


def test_docker_kill_of_a_model_is_retried_as_the_platforms_fault(
    task_dir: Path, tmp_path: Path, example_image, owner: str, docker_client
) -> None:
    """Chaos on the engine: an operator's (or the engine's) ``docker kill`` of a running model
    ends that attempt as ``platform_error``, the job runs again from the platform's budget and
    is scored once; the submitter is not blamed and none of their attempts is spent."""
    service = Service.open(tmp_path / "data", config_dir=task_dir)
    killed: list[str] = []
    stop = threading.Event()
    killer = threading.Thread(
        target=_kill_the_first_model, args=(docker_client, owner, killed, stop), daemon=True
    )
    try:
        spec = {"kind": "docker", "image": example_image("sentiment_lexicon"), "protocol": "v1"}
        model_id, _ = service.store.submit("zoo", "killed-once", spec)
        killer.start()
        worker = Worker(
            service.store,
            service.blobs,
            service.tasks,
            worker_id=owner,
            config_dir=task_dir,
            retry_policy=RetryPolicy(first_delay_s=0.0),  # the retry is claimable at once
        )
        stats = worker.work(burst=True)
        assert killed, "the model was never seen running"
        job = service.queries.submission(model_id)["job"]
        history = [(a["outcome"], a["failure_code"]) for a in job["attempt_history"]]
        assert history == [("failed", "platform_error"), ("done", None)], job
        assert (stats.done, stats.requeued, job["status"]) == (1, 1, "done")
        # the killed attempt came from the platform's budget: 1 of the submitter's 3 spent
        assert (job["attempts"], job["max_attempts"]) == (2, 4)
        assert managed(docker_client, owner) == []
    finally:
        stop.set()
        killer.join(timeout=10)
        service.close()
