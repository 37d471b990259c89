"""Measurement conditions: collected, stored with every result, fingerprinted, and a
leaderboard warning (API and page) when a board ranks results measured differently."""

from __future__ import annotations

import csv
import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from api.app import create_app
from configs.schema import Limits
from dynascore.weights import Weights
from evaluator.conditions import Conditions, collect, cpu_model_of, cpuset_size, read_cpu_model
from evaluator.pipeline import run_evaluation
from evaluator.profiling import pin_thread, pinned
from evaluator.runtimes.docker.runtime import DockerRuntime
from evaluator.runtimes.process import ProcessRuntime
from evaluator.runtimes.runtime import Runtime, RuntimeConditions, cpu_list, split_cpus
from evaluator.tasks import load_tasks
from evaluator.transport.endpoint import Endpoint
from store.blobs import LocalBlobStore
from tests.conftest import V1_SERVER, make_config_dir, server_command
from tests.unit.test_api import AXES_A, finished, make_service
from usecases.boards.leaderboard import leaderboard
from usecases.boards.measurement import UNKNOWN, condition_groups, warnings_for
from usecases.service import Service

X86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R)  Xeon(R) CPU @ 2.20GHz\n"
ARM = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n\nModel\t: Raspberry Pi 4\n"


def conditions(**changes: Any) -> Conditions:
    base: dict[str, Any] = {
        "cpu_model": "Intel Xeon",
        "host_cpus": 2,
        "runtime": "docker",
        "cpuset": "1",
        "cpu_limit": 1.0,
        "memory_limit_bytes": 2 * 1024**3,
        "evaluator_cpuset": "0",
        "engine": "docker 20.10.24+dfsg1",
        "cgroup_version": "2",
        "tool_version": "0.1.0+gabc",
    }
    return Conditions(**{**base, **changes})


# -- collecting -------------------------------------------------------------------------------
def test_the_cpu_model_is_read_from_cpuinfo(tmp_path: Path) -> None:
    assert cpu_model_of(X86) == "Intel(R) Xeon(R) CPU @ 2.20GHz"  # spaces folded
    assert cpu_model_of(ARM) == "Raspberry Pi 4"
    assert cpu_model_of("processor\t: 0\n") is None
    assert read_cpu_model(tmp_path / "missing") is None


def test_cpu_lists_and_the_split_between_model_and_evaluator() -> None:
    assert cpu_list([3, 0, 1, 2, 6, 8, 9]) == "0-3,6,8-9"
    assert cpuset_size("0-3,6,8-9") == 7
    assert split_cpus({0, 1}, 1.0) == (frozenset({1}), frozenset({0}))
    assert split_cpus(range(8), 2.5) == (frozenset({5, 6, 7}), frozenset(range(5)))
    assert split_cpus({0, 1}, 4.0) == (frozenset({1}), frozenset({0}))  # evaluator keeps one
    assert split_cpus({0}, 1.0) is None  # one core: no split


class FakeRuntime(Runtime):
    kind = "fake"

    def __init__(self, given: RuntimeConditions | Exception) -> None:
        self.given = given

    def start(self) -> Endpoint:
        raise NotImplementedError

    def stop(self) -> None:
        pass

    def conditions(self) -> RuntimeConditions:
        if isinstance(self.given, Exception):
            raise self.given
        return self.given


def test_collect_takes_the_runtimes_part_and_never_raises(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(X86)
    given = RuntimeConditions(True, "1", 1.0, 2 * 1024**3, "0", "docker 24.0.7", "2")
    found = collect(FakeRuntime(given), cpuinfo=cpuinfo)
    assert (found.cpu_model, found.runtime, found.cpuset, found.evaluator_cpuset) == (
        "Intel(R) Xeon(R) CPU @ 2.20GHz", "fake", "1", "0",
    )  # fmt: skip
    assert found.tool_version and found.host_cpus >= 1
    broken = collect(FakeRuntime(RuntimeError("engine gone")), cpuinfo=cpuinfo)
    assert broken.cpuset is None and broken.engine is None  # unknowns, not a failure
    assert broken.cpu_model is None  # a model elsewhere (a URL): this CPU is not its CPU


def test_the_fingerprint_keeps_what_changes_speed_and_memory_only() -> None:
    base = conditions()
    assert conditions(cpuset="3", evaluator_cpuset="0-2").fingerprint() == base.fingerprint()
    assert conditions(tool_version="0.1.0+gdef").fingerprint() == base.fingerprint()
    assert conditions(engine="docker 20.10.25").fingerprint() == base.fingerprint()
    for changed in (
        {"cpu_model": "AMD EPYC"},
        {"cpu_limit": 2.0, "cpuset": "1-2"},
        {"memory_limit_bytes": 4 * 1024**3},
        {"evaluator_cpuset": None, "cpuset": "0-1"},  # shared CPUs
        {"runtime": "process"},
        {"cgroup_version": "1"},
        {"engine": "docker 24.0.7"},
        {"method": "loadgen-2"},
    ):
        assert conditions(**changed).fingerprint() != base.fingerprint(), changed
    stored = base.to_dict()
    assert stored["fingerprint"] == base.fingerprint() and stored["tool_version"] == "0.1.0+gabc"
    assert "Intel Xeon · 1 CPU (own) · 2 GiB limit · docker docker 20.10" in stored["label"]


# -- CPU placement ----------------------------------------------------------------------------
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_pinning_is_per_thread_and_restored() -> None:
    before = os.sched_getaffinity(0)
    seen: dict[str, set[int]] = {}

    def other() -> None:  # a thread that pins itself leaves the others where they were
        pin_thread({max(before)})
        seen["other"] = os.sched_getaffinity(0)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen["other"] == {max(before)} and os.sched_getaffinity(0) == before
    with pinned({min(before)}):
        seen["inside"] = os.sched_getaffinity(0)
    assert seen["inside"] == {min(before)}
    assert os.sched_getaffinity(0) == before  # the worker thread goes on unpinned
    with pinned(None):  # no split (one CPU): nothing changes
        assert os.sched_getaffinity(0) == before


class FakeDockerClient:
    def version(self) -> dict[str, str]:
        return {"Version": "20.10.24+dfsg1"}

    def info(self) -> dict[str, str]:
        return {"CgroupVersion": "2"}


def docker_runtime(cpus: set[int]) -> DockerRuntime:
    client: Any = FakeDockerClient()  # start() is never called: no engine needed
    return DockerRuntime("img", Limits(), client=client, host_cpus=cpus)


def test_the_docker_model_gets_its_own_cpuset_apart_from_the_evaluator() -> None:
    two = docker_runtime({0, 1})
    two.guard_id = "guard"
    assert two._run_kwargs()["cpuset_cpus"] == "1"
    assert two.evaluator_cpus() == frozenset({0})
    found = two.conditions()
    assert found == RuntimeConditions(
        True, "1", 1.0, 2 * 1024**3, "0", "docker 20.10.24+dfsg1", "2"
    )
    assert two.info().details["limits"]["cpuset_cpus"] == "1"
    one = docker_runtime({0})
    one.guard_id = "guard"
    assert "cpuset_cpus" not in one._run_kwargs() and one.evaluator_cpus() is None
    assert one.conditions().cpuset == "0" and one.conditions().evaluator_cpuset is None


# -- stored with every result -----------------------------------------------------------------
def test_a_result_stores_its_conditions_in_profile_provenance_and_summary(tmp_path: Path) -> None:
    config_dir = make_config_dir(tmp_path / "configs")
    task = load_tasks(config_dir / "tasks")["toy"]
    runtime = ProcessRuntime(server_command(V1_SERVER, "rule"))
    result = run_evaluation(
        task, runtime, LocalBlobStore(tmp_path / "blobs"), config_dir=config_dir
    )
    assert result.status == "done", result.failure
    stored = result.profile["conditions"]
    assert stored["runtime"] == "process" and stored["tool_version"]
    assert stored["cpuset"] == cpu_list(os.sched_getaffinity(0)) and stored["cpu_limit"] is None
    assert result.provenance["conditions"] == stored
    assert result.summary["conditions"]["fingerprint"] == stored["fingerprint"]
    assert result.summary["throughput_mode"] == "offline"
    throughput = result.profile["throughput"]
    assert throughput["repeats"] == 3 and len(throughput["runs"]["single_stream"]) == 3
    assert throughput["method"]["min_duration_s"] == task.profiling.min_duration_s


# -- the leaderboard warning ------------------------------------------------------------------
def row(
    model_id: str, performance: float, fingerprint: str | None, mode: str | None = None
) -> dict:
    found: dict[str, Any] = {
        "model_id": model_id,
        "name": model_id,
        "performance": performance,
        "throughput": 10.0 + performance,
        "memory": 1.0,
        "robustness": 90.0,
        "fairness": 90.0,
        "throughput_mode": mode,
    }
    if fingerprint is not None:
        comparable = {"cpu_model": fingerprint, "runtime": "docker"}
        found["conditions"] = {"fingerprint": fingerprint, "label": f"on {fingerprint}",
                               "comparable": comparable}  # fmt: skip
    return found


def test_one_fingerprint_means_no_warning(toy_task) -> None:  # type: ignore[no-untyped-def]
    board = leaderboard(toy_task, [row("a", 80, "f1"), row("b", 70, "f1")], Weights({}))
    assert board["warnings"] == []
    assert [m["conditions"] for m in board["models"]] == ["f1", "f1"]
    only_old = leaderboard(toy_task, [row("a", 80, None), row("b", 70, None)], Weights({}))
    assert only_old["warnings"] == []  # nothing to tell apart: no warning, still "unknown"
    assert {m["conditions"] for m in only_old["models"]} == {UNKNOWN}


def test_mixed_fingerprints_warn_with_groups_and_unknown_rows_say_so(toy_task) -> None:  # type: ignore[no-untyped-def]
    rows = [row("a", 80, "f1"), row("b", 70, "f2"), row("c", 60, "f1"), row("d", 50, None)]
    board = leaderboard(toy_task, rows, Weights({}), limit=1)
    (warning,) = board["warnings"]  # over every ranked model, not the one-model page
    assert warning["code"] == "mixed_conditions"
    assert [(g["fingerprint"], g["letter"], g["models"]) for g in warning["groups"]] == [
        ("f1", "A", 2), ("f2", "B", 1), (UNKNOWN, "C", 1),
    ]  # fmt: skip
    assert warning["groups"][2]["conditions"] is None
    assert "1 model was measured before conditions were recorded" in warning["message"]
    assert warning["differs_in"] == ["cpu_model"]


def test_mixed_throughput_modes_warn() -> None:
    rows = [row("a", 80, "f1", "offline"), row("b", 70, "f1", "single_stream"), row("c", 60, "f1")]
    (warning,) = warnings_for(rows)
    assert warning["code"] == "mixed_throughput_modes"
    assert warning["modes"] == {"offline": 2, "single_stream": 1}  # older rows were batched
    assert condition_groups([]) == []


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = make_service(tmp_path)
    yield svc
    svc.close()


def seeded(service: Service) -> FlaskClient:
    finished(service, "old", {**AXES_A, "performance": 70.0})  # stored before conditions
    finished(service, "new", {**AXES_A, "throughput_mode": "single_stream",
                              "conditions": row("x", 1, "f9")["conditions"]})  # fmt: skip
    return create_app(service).test_client()


def test_the_api_and_the_page_show_the_warning(service: Service) -> None:
    client = seeded(service)
    body = client.get("/api/v1/tasks/sentiment/leaderboard").get_json()
    codes = [w["code"] for w in body["warnings"]]
    assert codes == ["mixed_conditions", "mixed_throughput_modes"]
    by_name = {m["name"]: m for m in body["models"]}
    assert by_name["new"]["conditions"] == "f9" and by_name["old"]["conditions"] == UNKNOWN
    assert by_name["new"]["throughput_mode"] == "single_stream"
    page = client.get("/tasks/sentiment").get_data(as_text=True)
    assert 'id="warning-mixed_conditions"' in page and "on f9" in page
    assert "unknown: measured before conditions were recorded" in page
    assert 'class="mode"' in page and 'class="cond"' in page
    download = client.get("/api/v1/tasks/sentiment/leaderboard/download?format=csv")
    rows = {r["name"]: r for r in csv.DictReader(io.StringIO(download.get_data(as_text=True)))}
    assert (rows["new"]["throughput_mode"], rows["new"]["conditions"]) == ("single_stream", "f9")
    assert rows["old"]["conditions"] == UNKNOWN


def test_the_openapi_document_describes_the_warnings(service: Service) -> None:
    spec = create_app(service).test_client().get("/api/v1/openapi.json").get_json()
    schemas = spec["components"]["schemas"]
    assert "warnings" in schemas["Leaderboard"]["properties"]
    assert {"code", "message", "groups", "differs_in", "modes"} <= set(
        schemas["LeaderboardWarning"]["properties"]
    )
    assert {"throughput_mode", "conditions"} <= set(schemas["LeaderboardEntry"]["properties"])
