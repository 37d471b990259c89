"""The hostile-container zoo, end to end through the evaluation pipeline.

Each misbehaving image (tests/integration/zoo/<name>/) must end in its own failure code,
carry the container's log tail, and leave no container or network behind (checked after
every test by the autouse fixture in conftest.py).
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from configs.schema import Limits
from configs.vocabulary.results import EvaluationResult
from evaluator.pipeline import run_evaluation
from evaluator.runtimes.docker.runtime import DockerRuntime
from evaluator.tasks import load_task
from store.blobs import LocalBlobStore
from tests.integration.test_docker_sandbox import gateway

pytestmark = pytest.mark.docker

BASE_LIMITS = Limits(
    memory_gib=0.25,
    cpus=0.5,
    pids=64,
    tmpfs_mib=8,
    startup_s=20,
    request_s=5,
    total_s=120,
    max_log_bytes=16 * 1024,
)


def evaluate(
    task_dir: Path,
    image: str,
    owner: str,
    client,
    env: dict[str, str] | None = None,
    **limits: float,
) -> EvaluationResult:
    task = load_task(task_dir / "tasks" / "zoo.yaml", task_dir)
    task = replace(task, limits=replace(BASE_LIMITS, **limits))
    runtime = DockerRuntime(image, task.limits, client=client, label_owner=owner, env=env)
    blobs = LocalBlobStore(task_dir / "blobs")
    return run_evaluation(task, runtime, blobs, config_dir=task_dir)


def assert_failure(result: EvaluationResult, code: str, log_text: str) -> None:
    assert result.status == "failed", result
    assert result.failure is not None
    assert result.failure.code == code, result.failure
    assert result.failure.user_caused
    assert log_text in result.failure.log_tail, result.failure.log_tail[-1000:]


def test_fork_bomb_ends_in_pids_exhausted(task_dir, zoo_image, owner, docker_client):
    result = evaluate(task_dir, zoo_image("fork_bomb"), owner, docker_client)
    assert_failure(result, "pids_exhausted", "fork bomb starting")


def test_memory_hog_is_oom_killed(task_dir, zoo_image, owner, docker_client):
    result = evaluate(task_dir, zoo_image("memory_hog"), owner, docker_client, memory_gib=0.125)
    assert_failure(result, "oom_killed", "allocating without end")
    assert "0.125 GiB" in result.failure.message


def test_disk_filler_ends_in_disk_full(task_dir, zoo_image, owner, docker_client):
    result = evaluate(task_dir, zoo_image("disk_filler"), owner, docker_client)
    assert_failure(result, "disk_full", "No space left on device")


def test_egress_attempts_fail_and_reach_nothing(
    task_dir, zoo_image, owner, docker_client, host_listener
):
    targets = (
        f"{gateway(docker_client, 'bridge')}:{host_listener.port},GATEWAY:{host_listener.port}"
    )
    env = {"DYNAEVAL_ZOO_TARGETS": targets}
    result = evaluate(task_dir, zoo_image("egress"), owner, docker_client, env=env)
    assert_failure(result, "bad_status", "egress blocked")
    assert "REACHED" not in result.failure.log_tail
    assert result.failure.log_tail.count("egress blocked") >= 2
    assert host_listener.accepted == 0


def test_never_healthy(task_dir, zoo_image, owner, docker_client):
    result = evaluate(task_dir, zoo_image("never_healthy"), owner, docker_client, startup_s=3)
    assert_failure(result, "never_healthy", "zoo model listening")


def test_hang_on_predict_times_out(task_dir, zoo_image, owner, docker_client):
    result = evaluate(task_dir, zoo_image("hang"), owner, docker_client, request_s=2)
    assert_failure(result, "request_timeout", "hanging on purpose")


def test_wrong_number_of_predictions(task_dir, zoo_image, owner, docker_client):
    result = evaluate(task_dir, zoo_image("wrong_count"), owner, docker_client)
    assert_failure(result, "wrong_count", "zoo model listening")


def test_label_outside_label_set(task_dir, zoo_image, owner, docker_client):
    result = evaluate(task_dir, zoo_image("bad_label"), owner, docker_client)
    assert_failure(result, "label_outside_set", "zoo model listening")
    assert "'maybe'" in result.failure.message


def test_crash_mid_run(task_dir, zoo_image, owner, docker_client):
    result = evaluate(task_dir, zoo_image("crash_midrun"), owner, docker_client)
    assert_failure(result, "crashed", "crashing on purpose after 2 batches")
    assert "exited with code 3" in result.failure.message


def test_log_flood_is_capped(task_dir, zoo_image, owner, docker_client):
    result = evaluate(task_dir, zoo_image("log_flood"), owner, docker_client)
    assert_failure(result, "crashed", "flood done: exiting with code 4")
    assert len(result.failure.log_tail.encode()) <= BASE_LIMITS.max_log_bytes
    assert "exited with code 4" in result.failure.message
    # On disk, the engine keeps at most two json-file logs of max-size each.
    runtime = DockerRuntime(
        zoo_image("log_flood"), BASE_LIMITS, client=docker_client, label_owner=owner
    )
    try:
        runtime.start()
        deadline = time.monotonic() + 60
        while runtime.alive():
            assert time.monotonic() < deadline
            time.sleep(0.2)
        log_path = docker_client.api.inspect_container(runtime.container_id)["LogPath"]
        if os.access(log_path, os.R_OK):
            logs = [
                p for p in Path(log_path).parent.iterdir() if p.name.startswith(Path(log_path).name)
            ]
            on_disk = sum(p.stat().st_size for p in logs)
            assert on_disk <= 2 * 64 * 1024 + 8 * 1024, on_disk
    finally:
        runtime.stop()


def test_root_image_runs_as_uid_10001_and_scores(task_dir, zoo_image, owner, docker_client):
    image = zoo_image("root_user")
    assert docker_client.images.get(image).attrs["Config"].get("User", "") == ""
    task = load_task(task_dir / "tasks" / "zoo.yaml", task_dir)
    task = replace(task, limits=BASE_LIMITS)
    runtime = DockerRuntime(image, task.limits, client=docker_client, label_owner=owner)
    result = run_evaluation(task, runtime, LocalBlobStore(task_dir / "blobs"), config_dir=task_dir)
    assert result.status == "done", result.failure
    assert "as uid=10001" in runtime.logs_tail()
    assert result.provenance["runtime"]["user"] == "10001:10001"
    assert result.provenance["runtime"]["image_user"] == ""
    assert result.profile["memory"] is not None
