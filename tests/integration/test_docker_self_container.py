"""An evaluator running in a container joins the run's network: detection, and a real
stand-in container that reaches the sandboxed model only while joined.

Traffic goes only to the sandbox these tests start (its model's listener).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from configs.schema import Limits
from evaluator.errors import EvaluationError
from evaluator.runtimes.docker import self_container
from evaluator.runtimes.docker.runtime import DockerRuntime
from tests.integration.conftest import BASE_IMAGE, TEST_LABELS

LIMITS = Limits(memory_gib=0.25, cpus=0.5, pids=48, tmpfs_mib=8, startup_s=30)
ID = "0123456789abcdef" * 4

MOUNTINFO = f"""\
22 1 0:40 / / rw,relatime - overlay overlay rw
630 22 254:0 /var/lib/docker/containers/{ID}/resolv.conf /etc/resolv.conf rw - ext4 /dev/vda rw
631 22 254:0 /var/lib/docker/containers/{ID}/hostname /etc/hostname rw - ext4 /dev/vda rw
632 22 254:0 /var/lib/docker/volumes/x/_data /data rw - ext4 /dev/vda rw
"""


def test_ids_in_mountinfo() -> None:
    assert self_container.ids_in_mountinfo(MOUNTINFO) == [ID, ID]
    assert self_container.ids_in_mountinfo("42 27 254:0 /var/lib/docker /var/lib/docker rw") == []


def test_ids_in_cgroup() -> None:
    text = f"12:pids:/docker/{ID}\n1:cpu:/system.slice/docker-{ID}.scope\n0::/\n4:memory:/user"
    assert self_container.ids_in_cgroup(text) == [ID, ID]
    assert self_container.ids_in_cgroup("0::/\n") == []


def test_no_candidates_outside_a_docker_container(tmp_path) -> None:
    assert self_container.candidates(str(tmp_path)) == []  # no .dockerenv


@pytest.fixture
def stand_in(docker_client, base_image) -> Iterator:
    """A throwaway container standing in for a containerised worker (default bridge)."""
    container = docker_client.containers.run(
        BASE_IMAGE,
        ["sleep", "120"],
        name=f"dynaeval-test-worker-{uuid.uuid4().hex[:8]}",
        detach=True,
        labels=TEST_LABELS,
    )
    try:
        container.reload()
        yield container
    finally:
        container.remove(force=True)


_CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1.5).close()
    print("REACHED")
except OSError as exc:
    print("blocked", type(exc).__name__)
"""


def reaches(container, runtime: DockerRuntime, budget_s: float = 0.0) -> bool:
    """Whether ``container`` opens a TCP connection to the sandboxed model (retrying for
    ``budget_s`` while the model starts listening)."""
    cmd = ["python3", "-c", _CONNECT, str(runtime.host), str(runtime.port)]
    deadline = time.monotonic() + budget_s
    while True:
        _, output = container.exec_run(cmd)
        if "REACHED" in output.decode():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


@pytest.mark.docker
def test_detection_is_verified_against_the_engine(docker_client, stand_in, monkeypatch) -> None:
    hostname = stand_in.attrs["Config"]["Hostname"]
    _, mountinfo = stand_in.exec_run(["cat", "/proc/self/mountinfo"])
    assert stand_in.id in self_container.ids_in_mountinfo(mountinfo.decode())
    assert self_container.verified(docker_client, ["no-such-container", stand_in.id], hostname) == (
        stand_in.id
    )
    assert self_container.verified(docker_client, [stand_in.id], "another-host") is None
    monkeypatch.setenv(self_container.ENV, stand_in.name)
    assert self_container.self_container(docker_client) == stand_in.id
    monkeypatch.setenv(self_container.ENV, "dynaeval-test-no-such-container")
    with pytest.raises(EvaluationError, match="names no container"):
        self_container.self_container(docker_client)


@pytest.mark.docker
def test_a_containerised_worker_joins_the_run_network(
    docker_client, example_image, owner, stand_in, monkeypatch
) -> None:
    monkeypatch.setenv(self_container.ENV, stand_in.name)
    runtime = DockerRuntime(example_image("null"), LIMITS, client=docker_client, label_owner=owner)
    try:
        runtime.start()
        assert runtime.joined_id == stand_in.id
        assert reaches(stand_in, runtime, budget_s=30)
        network_id = runtime.network_id
        self_container.detach(docker_client, stand_in.id, network_id)
        assert not reaches(stand_in, runtime)  # control: not joined, not reachable
        self_container.detach(docker_client, stand_in.id, network_id)  # already detached
        assert self_container.attach(docker_client, network_id) == stand_in.id
        assert self_container.attach(docker_client, network_id) == stand_in.id  # already in
        assert reaches(stand_in, runtime)
    finally:
        runtime.stop()  # detaches the stand-in, else the network could not be removed
    assert runtime.network_id is None and runtime.joined_id is None
    assert (
        stand_in.id
        not in docker_client.api.inspect_container(stand_in.id)["NetworkSettings"]["Networks"]
    )
    self_container.detach(docker_client, stand_in.id, network_id)  # network gone: fine
