"""Sandbox properties of the docker runtime, one test each, checked from inside the container.

Network checks only ever send traffic to listeners these tests start (on the host or in a
container on a network the test created) and to the container's own namespace.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import struct
import time
from collections.abc import Iterator

import pytest

from configs.schema import Limits
from configs.vocabulary.failures import FailureCode
from evaluator.runtimes.docker.runtime import DockerRuntime
from evaluator.runtimes.docker.sandbox import cleanup_leftovers
from tests.conftest import wait_until
from tests.integration.conftest import TEST_LABELS

pytestmark = pytest.mark.docker

LIMITS = Limits(memory_gib=0.25, cpus=0.5, pids=48, tmpfs_mib=8, startup_s=30)


def wait_http(host: str, port: int, path: str = "/health", budget: float = 30.0) -> int:
    """Poll until ``GET path`` gets an HTTP answer; returns its status."""
    deadline = time.monotonic() + budget
    while True:
        try:
            conn = http.client.HTTPConnection(host, port, timeout=2)
            conn.request("GET", path)
            status = conn.getresponse().status
            conn.close()
            return status
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def exec_in(runtime: DockerRuntime, *cmd: str) -> tuple[int, str]:
    """Run ``cmd`` inside the model container (as its user, with its restrictions)."""
    container = runtime.client.containers.get(runtime.container_id)
    code, output = container.exec_run(list(cmd))
    return code, output.decode("utf-8", "replace")


def exec_python(runtime: DockerRuntime, source: str) -> tuple[int, str]:
    return exec_in(runtime, "python3", "-c", source)


# The model's main process: started from outside the PID namespace (PPid 0) and not PID 1,
# which is the guard's init; this probe (also PPid 0) skips itself.
_MAIN_STATUS = """
import os
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    if pid in (1, os.getpid()):
        continue
    try:
        status = open(f"/proc/{pid}/status").read()
    except OSError:
        continue
    if "\\nPPid:\\t0\\n" in status:
        print(status)
        break
"""


def model_status(runtime: DockerRuntime) -> dict[str, str]:
    """``/proc/<pid>/status`` of the model's main process, as a field -> value dict."""
    code, status = exec_python(runtime, _MAIN_STATUS)
    assert code == 0 and "Uid:" in status, status
    return {
        k: v.strip() for k, v in (line.split(":", 1) for line in status.splitlines() if ":" in line)
    }


@pytest.fixture
def sandboxed(docker_client, example_image, owner) -> Iterator[DockerRuntime]:
    """The null example model, started in the sandbox and healthy."""
    runtime = DockerRuntime(example_image("null"), LIMITS, client=docker_client, label_owner=owner)
    try:
        endpoint = runtime.start()
        assert wait_http(endpoint.host, endpoint.port) == 200
        yield runtime
    finally:
        runtime.stop()


_CONNECT = """
import socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1.5).close()
        print("REACHED", target)
    except OSError as exc:
        print("blocked", target, type(exc).__name__)
"""


def gateway(client, network: str) -> str:
    """The host's address on a Docker network (its IPAM gateway, else the subnet's first IP)."""
    config = client.networks.get(network).attrs["IPAM"]["Config"][0]
    return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


def try_connect(runtime: DockerRuntime, *targets: str) -> str:
    container = runtime.client.containers.get(runtime.container_id)
    _, output = container.exec_run(["python3", "-c", _CONNECT, *targets])
    return output.decode()


def test_host_reaches_model_without_published_ports(sandboxed, docker_client):
    attrs = docker_client.api.inspect_container(sandboxed.container_id)
    assert not attrs["HostConfig"]["PortBindings"]
    assert not attrs["NetworkSettings"]["Ports"]
    assert attrs["HostConfig"]["NetworkMode"] == f"container:{sandboxed.guard_id}"
    network = docker_client.networks.get(sandboxed.network_id)
    assert network.attrs["Internal"] is True
    assert network.attrs["Labels"]["dynaeval.managed"] == "1"
    assert wait_http(sandboxed.host, sandboxed.port) == 200


def test_no_default_route(sandboxed):
    code, routes = exec_in(sandboxed, "cat", "/proc/net/route")
    assert code == 0
    rows = [line.split() for line in routes.splitlines()[1:] if line.strip()]
    assert rows, "expected the internal subnet's route"
    assert all(row[1] != "00000000" for row in rows), routes
    code, routes6 = exec_in(sandboxed, "cat", "/proc/net/ipv6_route")
    assert all(
        not line.startswith("0" * 32 + " 00 ") or " lo" in line for line in routes6.splitlines()
    )


def test_cannot_reach_host_listener(sandboxed, docker_client, host_listener):
    bridge_gateway = gateway(docker_client, "bridge")
    internal_gateway = gateway(docker_client, sandboxed.network_id)
    targets = [f"{bridge_gateway}:{host_listener.port}", f"{internal_gateway}:{host_listener.port}"]
    output = try_connect(sandboxed, *targets)
    assert "REACHED" not in output and output.count("blocked") == 2, output
    assert host_listener.accepted == 0
    # Control: an unsandboxed container on the default bridge does reach the same listener,
    # so the check above would have seen a leak.
    control = docker_client.containers.run(
        "dynaeval/python-base:latest",
        ["python3", "-c", _CONNECT, targets[0]],
        detach=True,
        labels=TEST_LABELS,
    )
    try:
        control.wait(timeout=30)
        assert "REACHED" in control.logs().decode()
    finally:
        control.remove(force=True)
    assert host_listener.accepted == 1


def test_cannot_reach_container_on_another_network(sandboxed, docker_client):
    network = docker_client.networks.create("dynaeval-test-other", labels=TEST_LABELS)
    server = None
    try:
        server = docker_client.containers.run(
            "dynaeval/python-base:latest",
            ["python3", "-m", "http.server", "8000"],
            detach=True,
            network=network.name,
            labels=TEST_LABELS,
        )
        server.reload()
        address = server.attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"]
        assert wait_http(address, 8000, "/") == 200  # it is up: the host reaches it
        output = try_connect(sandboxed, f"{address}:8000")
        assert "REACHED" not in output and "blocked" in output, output
    finally:
        if server is not None:
            server.remove(force=True)
        network.remove()


def _dns_query(name: str) -> bytes:
    header = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return header + labels + struct.pack(">HH", 1, 1)


def test_embedded_dns_unreachable(sandboxed, docker_client):
    # Docker's embedded DNS (127.0.0.11) forwards queries it cannot answer to the host's
    # resolvers; ask it only for the guard's own container name, which it answers locally.
    guard_name = docker_client.containers.get(sandboxed.guard_id).name
    source = _dns_probe(guard_name)
    code, output = exec_python(sandboxed, source)
    assert "blocked" in output, output
    # Control: an unsandboxed container on a user network gets its own name answered.
    network = docker_client.networks.create("dynaeval-test-dns", labels=TEST_LABELS)
    try:
        control = docker_client.containers.run(
            "dynaeval/python-base:latest",
            ["python3", "-c", _dns_probe("dynaeval-test-dns-control")],
            name="dynaeval-test-dns-control",
            detach=True,
            network=network.name,
            labels=TEST_LABELS,
        )
        try:
            control.wait(timeout=30)
            assert "ANSWERED" in control.logs().decode()
        finally:
            control.remove(force=True)
    finally:
        network.remove()


def _dns_probe(name: str) -> str:
    return (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1.5)\n"
        "try:\n"
        f"    s.sendto({_dns_query(name)!r}, ('127.0.0.11', 53))\n"
        "    s.recvfrom(512); print('ANSWERED')\n"
        "except OSError as exc:\n    print('blocked', type(exc).__name__)\n"
    )


def test_memory_limit_with_swap_off(sandboxed, docker_client):
    host_config = docker_client.api.inspect_container(sandboxed.container_id)["HostConfig"]
    expected = int(LIMITS.memory_gib * 1024**3)
    assert host_config["Memory"] == expected
    assert host_config["MemorySwap"] == expected  # equal: no swap on top of memory
    code, inside = exec_in(sandboxed, "cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
    assert code == 0 and int(inside) == expected


def test_cpu_and_pids_limits(sandboxed, docker_client):
    host_config = docker_client.api.inspect_container(sandboxed.container_id)["HostConfig"]
    assert host_config["NanoCpus"] == int(LIMITS.cpus * 1e9)
    assert host_config["PidsLimit"] == LIMITS.pids
    code, pids_max = exec_in(sandboxed, "cat", "/sys/fs/cgroup/pids/pids.max")
    assert code == 0 and int(pids_max) == LIMITS.pids
    source = (
        "import threading, time\n"
        "ok = failed = 0\n"
        f"for _ in range({LIMITS.pids * 2}):\n"
        "    try:\n"
        "        threading.Thread(target=time.sleep, args=(3,), daemon=True).start(); ok += 1\n"
        "    except RuntimeError:\n"
        "        failed += 1\n"
        "print(ok, failed)\n"
    )
    code, output = exec_python(sandboxed, source)
    started, failed = map(int, output.split()[-2:])
    assert failed > 0 and started < LIMITS.pids, output


def test_read_only_root_and_capped_tmp(sandboxed, docker_client):
    assert docker_client.api.inspect_container(sandboxed.container_id)["HostConfig"][
        "ReadonlyRootfs"
    ]
    source = (
        "import errno\n"
        "for path in ('/etc/dynaeval-probe', '/var/tmp/dynaeval-probe'):\n"
        "    try:\n        open(path, 'w').write('x'); print('WROTE', path)\n"
        "    except OSError as exc:\n        print('denied', path, errno.errorcode[exc.errno])\n"
        "open('/tmp/ok', 'w').write('fine'); print('tmp ok')\n"
        "n = 0\n"
        "try:\n"
        "    with open('/tmp/fill', 'wb') as f:\n"
        "        while n < 64:\n            f.write(b'0' * 1048576); f.flush(); n += 1\n"
        "except OSError as exc:\n    print('tmp full after', n, errno.errorcode[exc.errno])\n"
    )
    code, output = exec_python(sandboxed, source)
    assert "WROTE" not in output, output
    assert "denied /var/tmp/dynaeval-probe EROFS" in output  # 1777 dir: only read-only stops it
    assert "tmp ok" in output
    assert f"tmp full after {LIMITS.tmpfs_mib - 1}" in output or (
        f"tmp full after {LIMITS.tmpfs_mib}" in output
    ), output
    assert "ENOSPC" in output


def test_runs_as_non_root(sandboxed):
    fields = model_status(sandboxed)
    assert fields["Uid"].split() == ["10001"] * 4
    assert fields["Gid"].split() == ["10001"] * 4


def test_root_image_runs_as_non_root(docker_client, example_image, owner):
    image = example_image("dynalab2_sentiment")  # like Dynabench's images: no USER line
    assert docker_client.images.get(image).attrs["Config"].get("User", "") in ("", "root", "0")
    runtime = DockerRuntime(image, LIMITS, "dynalab2", client=docker_client, label_owner=owner)
    try:
        endpoint = runtime.start()
        wait_http(endpoint.host, endpoint.port, "/openapi.json")
        assert model_status(runtime)["Uid"].split() == ["10001"] * 4
    finally:
        runtime.stop()


def test_no_capabilities(sandboxed):
    fields = model_status(sandboxed)
    for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(fields[name], 16) == 0, (name, fields[name])


def test_no_new_privileges(sandboxed, docker_client):
    fields = model_status(sandboxed)
    assert fields["NoNewPrivs"] == "1"
    assert fields["Seccomp"] == "2"  # Docker's default seccomp profile is on
    security = docker_client.api.inspect_container(sandboxed.container_id)["HostConfig"]
    assert "no-new-privileges" in security["SecurityOpt"]


def test_log_is_capped_by_the_engine(sandboxed, docker_client):
    log_config = docker_client.api.inspect_container(sandboxed.container_id)["HostConfig"][
        "LogConfig"
    ]
    assert log_config["Type"] == "json-file"
    assert int(log_config["Config"]["max-size"]) <= max(64 * 1024, LIMITS.max_log_bytes)
    assert log_config["Config"]["max-file"] == "2"


def test_dynalab2_binds_port_80_as_non_root(docker_client, example_image, owner):
    runtime = DockerRuntime(
        example_image("dynalab2_sentiment"),
        LIMITS,
        "dynalab2",
        client=docker_client,
        label_owner=owner,
    )
    try:
        endpoint = runtime.start()
        assert endpoint.port == 80
        assert wait_http(endpoint.host, 80, "/openapi.json") == 200
        conn = http.client.HTTPConnection(endpoint.host, 80, timeout=10)
        body = json.dumps({"dataset_samples": [{"statement": "I loved it"}, {"statement": "bad"}]})
        conn.request("POST", "/model/batch_evaluation", body, {"Content-Type": "application/json"})
        reply = json.loads(conn.getresponse().read())
        conn.close()
        assert len(reply) == 2 and all("label" in item for item in reply)
    finally:
        runtime.stop()


def test_memory_is_sampled_from_the_cgroup_not_the_slow_stats_api(sandboxed, monkeypatch):
    """The engine's stats call takes ~1-2 s; the cgroup files are read directly instead."""

    def no_stats(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("memory sampling called the engine's stats API")

    monkeypatch.setattr(sandboxed.client.api, "stats", no_stats)
    samples = [sandboxed.sample_resources() for _ in range(20)]
    assert all(s is not None and 0 < s.rss_bytes < LIMITS.memory_gib * 1024**3 for s in samples)


def test_stop_is_idempotent_and_removes_everything(docker_client, example_image, owner):
    runtime = DockerRuntime(example_image("null"), LIMITS, client=docker_client, label_owner=owner)
    runtime.stop()  # before start: a no-op
    endpoint = runtime.start()
    wait_http(endpoint.host, endpoint.port)
    # the engine copies a container's output into its log on its own time: on a loaded
    # machine the model's first line may not be there yet when it already answers
    wait_until(lambda: "serving" in runtime.logs_tail(), 30, "the model's first log line")
    ids = (runtime.container_id, runtime.guard_id, runtime.network_id)
    runtime.stop()
    runtime.stop()
    selector = {"label": f"dynaeval.run={runtime.run_id}"}
    assert not docker_client.api.containers(all=True, filters=selector)
    assert not docker_client.api.networks(filters=selector)
    assert all(ids)
    assert not runtime.alive()
    assert "serving" in runtime.logs_tail()  # kept from before removal


def test_hard_stop_timer_removes_a_forgotten_sandbox(docker_client, example_image, owner):
    runtime = DockerRuntime(
        example_image("null"), LIMITS, client=docker_client, label_owner=owner, hard_timeout_s=1.0
    )
    runtime.start()
    deadline = time.monotonic() + 15
    selector = {"label": f"dynaeval.run={runtime.run_id}"}
    # The low-level listing: docker-py's containers.list() inspects each container and
    # raises NotFound when the timer removes one in between.
    while docker_client.api.containers(all=True, filters=selector):
        assert time.monotonic() < deadline, "the hard-stop timer did not remove the sandbox"
        time.sleep(0.2)
    assert runtime.exit_reason()[0] == "total_timeout"
    runtime.stop()


def test_cleanup_leftovers_removes_an_abandoned_run(docker_client, example_image, owner):
    abandoned = DockerRuntime(
        example_image("null"), LIMITS, client=docker_client, label_owner=f"{owner}-crashed"
    )
    abandoned.start()
    abandoned._hard_stop_timer.cancel()  # as if the worker had died
    assert cleanup_leftovers(f"{owner}-crashed", docker_client) == 3
    selector = {"label": f"dynaeval.owner={owner}-crashed"}
    assert not docker_client.api.containers(all=True, filters=selector)
    assert not docker_client.api.networks(filters=selector)
    assert cleanup_leftovers(f"{owner}-crashed", docker_client) == 0


_POKE_GUARD = """
import os, signal
status = open("/proc/1/status").read()
print("guard uid", [l.split()[1] for l in status.splitlines() if l.startswith("Uid:")][0])
for name, poke in (
    ("kill", lambda: os.kill(1, signal.SIGKILL)),
    ("term", lambda: os.kill(1, signal.SIGTERM)),
    ("environ", lambda: open("/proc/1/environ").read()),
    ("mem", lambda: open("/proc/1/mem", "rb").read(1)),
):
    try:
        poke()
        print("DID", name)
    except OSError as exc:
        print("denied", name, type(exc).__name__)
"""


def test_the_guard_is_pid_1_and_out_of_the_models_reach(sandboxed, docker_client):
    host_config = docker_client.api.inspect_container(sandboxed.container_id)["HostConfig"]
    assert host_config["PidMode"] == f"container:{sandboxed.guard_id}"
    code, output = exec_python(sandboxed, _POKE_GUARD)
    assert "guard uid 10002" in output, output
    assert "DID" not in output and output.count("denied") == 4, output
    time.sleep(0.5)  # a signal that got through would have ended the guard by now
    assert docker_client.api.inspect_container(sandboxed.guard_id)["State"]["Running"]
    assert wait_http(sandboxed.host, sandboxed.port) == 200


def _dead(runtime: DockerRuntime, budget_s: float = 10.0) -> None:
    deadline = time.monotonic() + budget_s
    while runtime.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not runtime.alive()


def test_docker_kill_of_the_model_is_the_platforms_fault(sandboxed, docker_client):
    """`docker kill` of a running model (not an OOM, guard alive) ended as `crashed` and
    was charged to the submitter; the engine's kill event now says who did it."""
    docker_client.api.kill(sandboxed.container_id)
    _dead(sandboxed)
    reason = sandboxed.exit_reason()
    assert reason is not None and reason.code == FailureCode.PLATFORM_ERROR, reason
    assert "killed from outside" in reason.sentence


def test_a_model_that_kills_itself_is_still_its_own_crash(sandboxed):
    """Control: the same SIGKILL sent by the model to its own main process is the model's."""
    container = sandboxed.client.containers.get(sandboxed.container_id)
    suicide = _MAIN_STATUS.replace("print(status)", "os.kill(pid, 9)")
    container.exec_run(["python3", "-c", suicide], detach=True)  # it dies with the model
    _dead(sandboxed)
    reason = sandboxed.exit_reason()
    assert reason is not None and reason.code == FailureCode.CRASHED, reason


def test_a_sandbox_whose_owner_died_ends_within_its_keepalive(docker_client, example_image, owner):
    """A killed embedded `serve` left its sandbox running for 1,950 s (the guard's cap):
    the guard now ends the run once its owner's keep-alive pings stop."""
    runtime = DockerRuntime(
        example_image("null"),
        LIMITS,
        client=docker_client,
        label_owner=owner,
        guard_keepalive_s=4.0,
    )
    try:
        endpoint = runtime.start()
        assert wait_http(endpoint.host, endpoint.port) == 200
        time.sleep(6.0)  # past the window: the pings kept it going
        assert runtime.alive()
        runtime._stop_keepalive()  # as if the owner's process had died
        runtime._hard_stop_timer.cancel()  # noqa: SLF001 - nor does its timer fire
        _dead(runtime, budget_s=15.0)
        guard = docker_client.api.inspect_container(runtime.guard_id)["State"]
        assert not guard["Running"]
        reason = runtime.exit_reason()  # not the model's crash: nobody kept it alive
        assert reason is not None and reason.code == FailureCode.PLATFORM_ERROR, reason
        assert "keep-alive" in reason.sentence
    finally:
        runtime.stop()
