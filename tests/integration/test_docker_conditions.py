"""The docker model's own cpuset, apart from the evaluator's measuring thread, and the
measurement conditions a docker evaluation stores (real engine)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from configs.schema import Limits
from evaluator import profiling
from evaluator.pipeline import run_evaluation
from evaluator.runtimes.docker.runtime import DockerRuntime
from evaluator.runtimes.runtime import cpu_list, split_cpus
from evaluator.tasks import load_tasks
from store.blobs import LocalBlobStore

pytestmark = pytest.mark.docker

CPUS = os.sched_getaffinity(0)
LIMITS = Limits(memory_gib=0.25, cpus=1.0, pids=48, tmpfs_mib=8, startup_s=30)


@pytest.mark.skipif(len(CPUS) < 2, reason="one CPU: the model and the evaluator share it")
def test_the_model_container_runs_on_its_own_cpuset(docker_client, example_image, owner):
    model_cpus, evaluator_cpus = split_cpus(CPUS, LIMITS.cpus) or (None, None)
    runtime = DockerRuntime(example_image("null"), LIMITS, client=docker_client, label_owner=owner)
    try:
        runtime.start()
        host_config = docker_client.api.inspect_container(runtime.container_id)["HostConfig"]
        assert host_config["CpusetCpus"] == cpu_list(model_cpus)
        container = docker_client.containers.get(runtime.container_id)
        code, output = container.exec_run(["grep", "Cpus_allowed_list", "/proc/self/status"])
        assert code == 0 and output.decode().split()[-1] == cpu_list(model_cpus)
        found = runtime.conditions()
        assert found.cpuset == cpu_list(model_cpus)
        assert found.evaluator_cpuset == cpu_list(evaluator_cpus)
        assert found.engine and found.engine.startswith("docker ")
        assert found.cgroup_version in ("1", "2")
    finally:
        runtime.stop()


def test_a_docker_evaluation_stores_its_conditions_and_profiles_off_the_models_cpus(
    docker_client, example_image, owner, task_dir: Path, tmp_path: Path, monkeypatch
):
    task = load_tasks(task_dir / "tasks")["zoo"]
    seen: list[set[int]] = []
    timed = profiling.timed_pass

    def watching(*args, **kwargs):  # the evaluating thread's CPUs while a pass is timed
        seen.append(os.sched_getaffinity(0))
        return timed(*args, **kwargs)

    monkeypatch.setattr(profiling, "timed_pass", watching)
    runtime = DockerRuntime(example_image("null"), task.limits, client=docker_client,
                            label_owner=owner)  # fmt: skip
    before = os.sched_getaffinity(0)
    result = run_evaluation(task, runtime, LocalBlobStore(tmp_path / "blobs"), config_dir=task_dir)
    assert result.status == "done", result.failure
    stored = result.provenance["conditions"]
    assert stored == result.profile["conditions"]
    assert stored["runtime"] == "docker" and stored["engine"].startswith("docker ")
    assert stored["memory_limit_bytes"] == int(task.limits.memory_gib * 1024**3)
    split = split_cpus(CPUS, task.limits.cpus)
    if split is None:  # one CPU: no split, the evaluator is not pinned
        assert stored["evaluator_cpuset"] is None and all(s == before for s in seen)
    else:
        assert stored["cpuset"] == cpu_list(split[0])
        assert stored["evaluator_cpuset"] == cpu_list(split[1])
        assert seen and all(s == set(split[1]) for s in seen)
    assert os.sched_getaffinity(0) == before  # the worker thread is given back unpinned
    assert result.summary["conditions"]["fingerprint"] == stored["fingerprint"]
