"""The ``process`` and ``url`` runtimes with real subprocesses on loopback."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from configs.schema import Limits, TaskSpec
from evaluator.runtimes.factory import make_runtime
from evaluator.runtimes.process import ProcessRuntime
from evaluator.runtimes.specs import parse_runtime_spec
from evaluator.runtimes.url import UrlRuntime
from evaluator.transport.client import ModelClient
from evaluator.transport.dialects import get_dialect
from evaluator.transport.endpoint import Endpoint
from store.blobs import LocalBlobStore
from tests.conftest import V1_SERVER, Server, gone, server_command, wait_until


@pytest.fixture
def runtimes() -> Iterator[Callable[..., ProcessRuntime]]:
    """``runtimes(mode, *args)``: a ProcessRuntime on the v1 fixture server, stopped after."""
    made: list[ProcessRuntime] = []

    def make(mode: str, *args: str) -> ProcessRuntime:
        made.append(ProcessRuntime(server_command(V1_SERVER, mode, *args)))
        return made[-1]

    yield make
    for runtime in made:
        runtime.stop()


def start_ready(runtime: ProcessRuntime, task: TaskSpec) -> Endpoint:
    endpoint = runtime.start()
    client = ModelClient(endpoint, task, task.limits)
    try:
        client.wait_ready(10.0, runtime.alive)
    finally:
        client.close()
    return endpoint


def logged_pids(runtime: ProcessRuntime, what: str) -> list[int]:
    wait_until(lambda: f"{what}=" in runtime.logs_tail(), 10.0, f"'{what}=' in the log")
    return [int(pid) for pid in re.findall(rf"{what}=(\d+)", runtime.logs_tail())]


# -- process runtime ------------------------------------------------------------------------
def test_start_serves_on_loopback_and_stop_is_idempotent(
    runtimes: Callable[..., ProcessRuntime], toy_task: TaskSpec
) -> None:
    runtime = runtimes("rule")
    runtime.stop()  # before start: nothing to do
    assert not runtime.alive() and runtime.exit_reason() is None
    endpoint = start_ready(runtime, toy_task)
    assert endpoint.host == "127.0.0.1" and endpoint.port == runtime.port
    assert runtime.alive() and runtime.exit_reason() is None
    (pid,) = logged_pids(runtime, "server pid")
    runtime.stop()
    runtime.stop()
    assert not runtime.alive() and gone(pid)
    assert "mode=rule" in runtime.logs_tail()  # the log outlives stop()
    assert runtime.info().details["command"][-1] == "rule"


def test_stop_kills_the_whole_process_group(
    runtimes: Callable[..., ProcessRuntime], toy_task: TaskSpec
) -> None:
    """The child ignores SIGTERM: only the group-wide SIGKILL ends it."""
    runtime = runtimes("spawn_child")
    start_ready(runtime, toy_task)
    (child,) = logged_pids(runtime, "child pid")
    wait_until(lambda: "child up" in runtime.logs_tail(), 10.0, "the child to start")
    assert not gone(child)
    runtime.stop()
    wait_until(lambda: gone(child), 10.0, "the child to be killed")


def test_stop_kills_children_the_crashed_leader_left_behind(
    runtimes: Callable[..., ProcessRuntime], toy_task: TaskSpec
) -> None:
    runtime = runtimes("spawn_child")
    start_ready(runtime, toy_task)
    (leader,) = logged_pids(runtime, "server pid")
    (child,) = logged_pids(runtime, "child pid")
    os.kill(leader, signal.SIGKILL)
    wait_until(lambda: not runtime.alive(), 10.0, "the leader to die")
    assert not gone(child)
    runtime.stop()
    wait_until(lambda: gone(child), 10.0, "the orphaned child to be killed")


def test_sample_resources_counts_the_children(
    runtimes: Callable[..., ProcessRuntime], toy_task: TaskSpec
) -> None:
    runtime = runtimes("spawn_child")
    start_ready(runtime, toy_task)
    (leader,) = logged_pids(runtime, "server pid")
    logged_pids(runtime, "child pid")
    wait_until(lambda: "child up" in runtime.logs_tail(), 10.0, "the child to start")
    sample = runtime.sample_resources()
    leader_rss = psutil.Process(leader).memory_info().rss
    assert sample is not None and sample.rss_bytes > leader_rss > 0
    runtime.stop()
    assert runtime.sample_resources() is None


def test_exit_reason_names_the_signal_after_a_kill(
    runtimes: Callable[..., ProcessRuntime], toy_task: TaskSpec
) -> None:
    runtime = runtimes("rule")
    start_ready(runtime, toy_task)
    (pid,) = logged_pids(runtime, "server pid")
    os.killpg(pid, signal.SIGKILL)
    wait_until(lambda: not runtime.alive(), 10.0, "the model to die")
    assert runtime.exit_reason() == ("crashed", "the model was killed by signal SIGKILL")


def test_exit_reason_gives_the_exit_code(
    runtimes: Callable[..., ProcessRuntime], toy_task: TaskSpec
) -> None:
    runtime = runtimes("exit_at_start")
    runtime.start()
    wait_until(lambda: not runtime.alive(), 10.0, "the model to exit")
    assert runtime.exit_reason() == ("crashed", "the model exited with code 3")
    assert "fatal: cannot load weights" in runtime.logs_tail()


def test_logs_tail_keeps_the_last_bytes(
    runtimes: Callable[..., ProcessRuntime], toy_task: TaskSpec
) -> None:
    runtime = runtimes("exit_at_start")
    runtime.start()
    wait_until(lambda: not runtime.alive(), 10.0, "the model to exit")
    assert runtime.logs_tail(13) == "load weights\n"


def test_an_empty_command_is_rejected() -> None:
    with pytest.raises(ValueError, match="empty"):
        ProcessRuntime([])


def test_a_command_string_is_split_like_a_shell() -> None:
    runtime = ProcessRuntime("python model.py --label 'not hateful'")
    assert runtime.command == ["python", "model.py", "--label", "not hateful"]


# -- url runtime ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://127.0.0.1:8080", "http://host:port"),
        ("ftp://127.0.0.1:8080", "http://host:port"),
        ("http://:8080", "http://host:port"),
        ("127.0.0.1:8080", "http://host:port"),
        ("http://127.0.0.1:8080/predict", "path"),
        ("http://127.0.0.1:8080/v1/", "path"),
    ],
)
def test_url_runtime_rejects_bad_urls(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        UrlRuntime(url)


def test_url_runtime_default_ports_and_endpoint() -> None:
    assert UrlRuntime("http://127.0.0.1").start() == Endpoint("127.0.0.1", 8080, get_dialect("v1"))
    assert UrlRuntime("http://127.0.0.1/", "dynalab2").start().port == 80
    runtime = UrlRuntime("http://127.0.0.1:9123")
    assert runtime.start() == Endpoint("127.0.0.1", 9123, get_dialect("v1"))
    runtime.stop()
    assert runtime.info().details == {"url": "http://127.0.0.1:9123"}


def test_url_runtime_talks_to_a_running_model_and_leaves_it_running(
    run_server: Callable[..., Server], toy_task: TaskSpec
) -> None:
    server = run_server(V1_SERVER, "rule")
    with UrlRuntime(f"http://127.0.0.1:{server.port}") as runtime:
        client = ModelClient(runtime.start(), toy_task, toy_task.limits)
        client.wait_ready(5.0)
        client.close()
    assert server.proc.poll() is None


# -- factory --------------------------------------------------------------------------------
def test_factory_builds_process_and_url_runtimes(tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path / "blobs")
    process = make_runtime(
        {"kind": "process", "command": ["python", "m.py"], "cwd": "examples"}, Limits(), blobs
    )
    assert isinstance(process, ProcessRuntime) and str(process.cwd).endswith("examples")
    url = make_runtime(
        {"kind": "url", "url": "http://127.0.0.1:9", "protocol": "dynalab2"}, Limits(), blobs
    )
    assert isinstance(url, UrlRuntime) and url.dialect.name == "dynalab2"


@pytest.mark.parametrize(
    "spec",
    [
        {"kind": "vm"},
        {"kind": "process"},
        {"kind": "url", "url": "http://127.0.0.1:9", "protocol": "grpc"},
        {"kind": "docker"},
    ],
)
def test_factory_rejects_bad_specs(spec: dict) -> None:
    with pytest.raises(ValueError):
        parse_runtime_spec(spec)


# -- an owner killed with kill -9 ------------------------------------------------------------
_OWNER = """
import sys, time
from evaluator.runtimes.process import ProcessRuntime
runtime = ProcessRuntime(sys.argv[1:])
runtime.start()
print(runtime._proc.pid, flush=True)
time.sleep(600)
"""


def test_a_model_process_dies_with_the_worker_that_started_it(tmp_path: Path) -> None:
    """A worker killed with SIGKILL mid-job runs no cleanup; the model must not outlive it."""
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, *server_command(V1_SERVER, "ok")],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        model_pid = int(owner.stdout.readline())  # type: ignore[union-attr]
        assert not gone(model_pid)
        owner.kill()
        owner.wait(timeout=30)
        wait_until(lambda: gone(model_pid), 10.0, "the orphaned model process to exit")
    finally:
        owner.kill()
        owner.wait(timeout=30)
        owner.stdout.close()  # type: ignore[union-attr]
