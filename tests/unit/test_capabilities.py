"""Workers that say what they can run, submissions that say what they need: the rules
(table-driven), claims on both backends with labelled workers, the API's requirements, the
GPUs a container is given, and NVML read through recorded answers (no GPU here)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from configs.vocabulary.capabilities import BadRequirements, Capabilities, Requirements
from configs.vocabulary.clock import ManualClock
from store.db import Database
from store.jobs import JobStore
from tests.unit.test_store import RUNTIME, result
from worker.capabilities import detect, gpu_samples, parse_devices

CPU_BOX = Capabilities(cpus=2, memory_gib=24.0, labels=frozenset({"cpu"}))
GPU_BOX = Capabilities(
    cpus=16, memory_gib=128.0, gpus=2, gpu_model="NVIDIA A100-SXM4-40GB",
    labels=frozenset({"gpu", "eu"}),
)  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, Requirements()),
        ({}, Requirements()),
        ({"gpus": 1}, Requirements(gpus=1)),
        ({"gpus": 2, "gpu_model": " a100 ", "labels": ["eu"]},
         Requirements(gpus=2, gpu_model="a100", labels=frozenset({"eu"}))),
        ({"cpus": 8, "memory_gib": 64}, Requirements(cpus=8, memory_gib=64.0)),
        ({"gpus": None, "cpus": None, "labels": None, "gpu_model": None}, Requirements()),
    ],
)  # fmt: skip
def test_requirements_parse(raw: Any, expected: Requirements) -> None:
    parsed = Requirements.parse(raw)
    assert parsed == expected
    assert Requirements.parse(parsed.to_dict()) == parsed  # as stored, and back


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ([1], "must be an object"),
        ({"gpu": 1}, "unknown requirement 'gpu'"),
        ({"gpus": -1}, "gpus must be a whole number from 0 to 16"),
        ({"gpus": 1.5}, "gpus must be"),
        ({"gpus": True}, "gpus must be"),
        ({"gpus": 17}, "gpus must be"),
        ({"gpu_model": "A100"}, "gpu_model needs gpus"),
        ({"gpu_model": "A100\n", "gpus": 1}, "printable"),
        ({"gpu_model": "---", "gpus": 1}, "letters or digits"),
        ({"memory_gib": 5e-324}, "memory_gib must be"),
        ({"x" * 10_000: 1}, "unknown requirement 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'"),
        ({"cpus": 0}, "cpus must be"),
        ({"memory_gib": 0}, "memory_gib must be"),
        ({"memory_gib": "8"}, "memory_gib must be"),
        ({"gpu_model": ""}, "gpu_model must be"),
        ({"gpu_model": "x" * 65}, "gpu_model must be"),
        ({"labels": "gpu"}, "labels must be a list"),
        ({"labels": ["GPU"]}, "a label is"),
        ({"labels": ["a b"]}, "a label is"),
        ({"labels": [f"l{i}" for i in range(17)]}, "at most 16"),
    ],
)
def test_bad_requirements_say_why(raw: Any, words: str) -> None:
    with pytest.raises(BadRequirements, match=words):
        Requirements.parse(raw)


@pytest.mark.parametrize(
    ("needs", "cpu_box", "gpu_box"),
    [
        ({}, True, True),
        ({"gpus": 1}, False, True),
        ({"gpus": 3}, False, False),
        ({"labels": ["cpu"]}, True, False),
        ({"labels": ["gpu", "eu"]}, False, True),
        ({"gpu_model": "a100", "gpus": 1}, False, True),
        ({"gpu_model": "A100-SXM4", "gpus": 1}, False, True),
        ({"gpu_model": "a10", "gpus": 1}, False, False),  # a word, not a part of one
        ({"gpu_model": "h100", "gpus": 1}, False, False),
        ({"cpus": 4}, False, True),
        ({"memory_gib": 24}, True, True),
        ({"memory_gib": 24.5}, False, True),
    ],
)
def test_which_worker_meets_what(needs: dict[str, Any], cpu_box: bool, gpu_box: bool) -> None:
    wanted = Requirements.parse(needs)
    assert (wanted.met_by(CPU_BOX), wanted.met_by(GPU_BOX)) == (cpu_box, gpu_box)


@pytest.fixture
def store(database_url: str) -> Iterator[JobStore]:
    db = Database(database_url)
    jobs = JobStore(db, ManualClock())
    jobs.register_task("sentiment", 1, {"name": "sentiment"})
    yield jobs
    db.dispose()


def submit(store: JobStore, name: str, needs: dict[str, Any] | None = None) -> str:
    requirements = Requirements.parse(needs) if needs is not None else None
    return store.submit("sentiment", name, RUNTIME, requirements=requirements)[1]


def drain(store: JobStore, worker: str, capabilities: Capabilities | None) -> list[str]:
    taken = []
    while (job := store.claim(worker, 600, capabilities=capabilities)) is not None:
        assert store.finish(job.id, worker, result(), lease=job.lease)
        taken.append(job.id)
    return taken


def test_only_a_worker_that_meets_them_claims_a_submissions_jobs(store: JobStore) -> None:
    plain = submit(store, "plain")
    gpu = submit(store, "gpu", {"gpus": 1})
    eu_gpu = submit(store, "eu-gpu", {"gpus": 2, "labels": ["eu"], "gpu_model": "A100"})
    cpu_label = submit(store, "cpu", {"labels": ["cpu"]})
    too_big = submit(store, "too-big", {"gpus": 8})
    assert drain(store, "nobody", None) == [plain]  # says nothing of itself: needs nothing
    assert drain(store, "cpu-box", CPU_BOX) == [cpu_label]
    assert drain(store, "gpu-box", GPU_BOX) == [gpu, eu_gpu]
    queued = store.claim("gpu-box", 600, capabilities=GPU_BOX)
    assert queued is None  # too_big waits for a worker with 8 GPUs
    assert too_big


def test_jobs_a_worker_cannot_run_never_hold_back_those_it_can(store: JobStore) -> None:
    """More label-bound jobs at the head of the queue than a claim looks through: the
    worker still takes the plain one behind them."""
    for i in range(40):
        submit(store, f"eu-{i}", {"labels": ["eu"]})
    plain = submit(store, "plain")
    cpu_labelled = submit(store, "cpu-labelled", {"labels": ["cpu"]})
    taken = store.claim("cpu-box", 600, capabilities=CPU_BOX)
    assert taken is not None and taken.id == plain
    taken = store.claim("cpu-box", 600, capabilities=CPU_BOX)  # labelled, behind 40 others
    assert taken is not None and taken.id == cpu_labelled


def test_the_claimed_job_carries_its_requirements(store: JobStore) -> None:
    submit(store, "gpu", {"gpus": 2, "labels": ["eu"]})
    claimed = store.claim("gpu-box", 600, capabilities=GPU_BOX)
    assert claimed is not None
    assert claimed.requirements == Requirements(gpus=2, labels=frozenset({"eu"}))


def test_a_container_gets_the_gpus_its_job_requires() -> None:
    from configs.schema import Limits
    from evaluator.runtimes.docker.runtime import DockerRuntime
    from tests.unit.test_conditions import FakeDockerClient

    runtime = DockerRuntime("img", Limits(), client=FakeDockerClient(), host_cpus={0, 1})  # type: ignore[arg-type]
    runtime.guard_id = "guard"
    assert "device_requests" not in runtime._run_kwargs()
    runtime.grant_gpus(("2", "3"))
    (request,) = runtime._run_kwargs()["device_requests"]
    # by id, never by count: a count hands every container the machine's first GPUs
    assert (request["DeviceIDs"], request["Capabilities"]) == (["2", "3"], [["gpu"]])
    assert not request.get("Count")


def test_workers_on_one_machine_each_get_a_gpu_share_of_their_own() -> None:
    machine = replace(GPU_BOX, gpus=4, gpu_devices=("0", "1", "2", "3"))
    assert [machine.share(i, 2).gpu_devices for i in range(2)] == [("0", "1"), ("2", "3")]
    assert [machine.share(i, 3).gpu_devices for i in range(3)] == [("0",), ("1",), ("2", "3")]
    lone = replace(GPU_BOX, gpus=1, gpu_devices=("GPU-5f1c2d0e-4b0a",))
    shares = [lone.share(i, 2) for i in range(2)]
    assert [(s.gpus, s.gpu_devices, s.gpu_model) for s in shares] == [
        (0, (), None), (1, ("GPU-5f1c2d0e-4b0a",), GPU_BOX.gpu_model)
    ]  # fmt: skip
    assert all(s.labels == GPU_BOX.labels and s.cpus == GPU_BOX.cpus for s in shares)
    assert GPU_BOX.gpu_devices == ("0", "1")  # unnamed: the machine's first
    with pytest.raises(ValueError, match="named twice"):
        replace(GPU_BOX, gpu_devices=("0", "0"))
    with pytest.raises(ValueError, match="GPUs offered"):
        replace(GPU_BOX, gpus=3)


def test_a_job_gets_its_workers_own_gpus_and_samples_only_those(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two embedded workers on a four-GPU machine: the second's job needing two GPUs runs
    on devices 2 and 3 (the first's are 0 and 1) and its profile samples those two."""
    from configs.vocabulary.capabilities import GpuSample
    from configs.vocabulary.results import EvaluationResult
    from tests.unit.test_api import make_service
    from tests.unit.test_worker import FakeModel, FakeRuntime
    from worker import evaluation
    from worker.progress import Progress

    service = make_service(tmp_path)
    try:
        granted: list[tuple[str, ...]] = []

        class Runtime(FakeRuntime):
            def grant_gpus(self, devices: Any) -> None:
                granted.append(tuple(devices))

        machine = replace(GPU_BOX, gpus=4, gpu_devices=("0", "1", "2", "3"))
        service.start_workers(2, capabilities=machine, poll_s=3600)
        second = service.workers[1].capabilities
        service.stop_workers()
        assert second is not None and second.gpu_devices == ("2", "3")
        four = [GpuSample(i, "A100", 1.0, 40.0, 10.0 * i) for i in range(4)]
        context = evaluation.JobContext(
            service.store, service.blobs, service.tasks,
            lambda *a, **k: Runtime(FakeModel()), "w", service.config_dir,
            gpu_sampler=lambda: four, gpu_devices=second.gpu_devices,
        )  # fmt: skip
        submit(service.store, "gpu", {"gpus": 2})
        job = service.store.claim("w", 600, capabilities=second)
        assert job is not None
        sampled: list[list[int]] = []

        def run(task: Any, *args: Any, gpu_sampler: Any, **kwargs: Any) -> EvaluationResult:
            sampled.append([sample.index for sample in gpu_sampler()])
            return EvaluationResult(task.name, "done", summary={"performance": 1.0})

        monkeypatch.setattr(evaluation, "run_evaluation", run)
        evaluation.evaluate_model(context, job, Progress(service.clock.now()))
        assert granted == [("2", "3")] and sampled == [[2, 3]]
    finally:
        service.close()


def test_a_worker_says_the_model_of_its_own_gpus() -> None:
    """On a machine with two kinds of GPU, a worker given the T4 must not claim a job
    that requires an A100, nor may the share of an embedded worker that owns the T4."""
    t4 = detect([], nvml=MixedNvml(), devices=["1"])
    assert (t4.gpu_model, t4.gpu_names) == ("Tesla T4", ("Tesla T4",))
    assert not Requirements(gpus=1, gpu_model="A100").met_by(t4)
    machine = detect([], nvml=MixedNvml())
    assert machine.gpu_model is None  # both: no model they all are
    first, second = machine.share(0, 2), machine.share(1, 2)
    assert (first.gpu_model, second.gpu_model) == ("NVIDIA A100-SXM4-40GB", "Tesla T4")
    assert Requirements(gpus=1, gpu_model="A100").met_by(first)
    assert not Requirements(gpus=1, gpu_model="A100").met_by(second)


def test_embedded_workers_told_to_need_nothing_stay_so(tmp_path: Any) -> None:
    from tests.unit.test_api import make_service

    service = make_service(tmp_path)
    try:
        service.start_workers(2, capabilities=None, poll_s=3600)
        assert [w.capabilities for w in service.workers] == [None, None]
    finally:
        service.close()


def test_an_operator_gives_a_worker_its_gpus() -> None:
    found = detect([], nvml=RecordedNvml(), devices=["1"])
    assert (found.gpus, found.gpu_devices, found.gpu_model) == (1, ("1",), "NVIDIA A100-SXM4-40GB")
    with pytest.raises(ValueError, match="no GPU 7"):
        detect([], nvml=RecordedNvml(), devices=["7"])
    assert parse_devices("0, 2") == ("0", "2")
    assert parse_devices("GPU-5f1c2d0e-4b0a-4f57") == ("GPU-5f1c2d0e-4b0a-4f57",)
    for bad in ("", ",", "zero", "0;rm -rf"):
        with pytest.raises(ValueError):
            parse_devices(bad)


class RecordedNvml:
    """NVML's answers as recorded on a machine with two A100s (pynvml's interface)."""

    def __init__(self) -> None:
        self.devices = [
            (b"NVIDIA A100-SXM4-40GB", 42_949_672_960, 2_147_483_648, 37),
            ("NVIDIA A100-SXM4-40GB", 42_949_672_960, 10_737_418_240, 91),
        ]

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802 - NVML's names
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        return index

    def nvmlDeviceGetName(self, handle: int) -> bytes | str:  # noqa: N802
        return self.devices[handle][0]

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:  # noqa: N802
        _, total, used, _ = self.devices[handle]
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(gpu=self.devices[handle][3], memory=0)


class MixedNvml(RecordedNvml):
    """A machine with an A100 (index 0) and a T4 (index 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.devices = [self.devices[0], ("Tesla T4", 16 * 2**30, 2**30, 5)]


def test_gpus_are_read_through_nvml() -> None:
    samples = gpu_samples(RecordedNvml())
    assert [(s.index, s.name, s.memory_total_gib, s.memory_used_gib, s.utilisation_percent)
            for s in samples] == [
        (0, "NVIDIA A100-SXM4-40GB", 40.0, 2.0, 37.0),
        (1, "NVIDIA A100-SXM4-40GB", 40.0, 10.0, 91.0),
    ]  # fmt: skip
    found = detect(["gpu", "eu"], nvml=RecordedNvml())
    assert (found.gpus, found.gpu_model, found.labels) == (
        2, "NVIDIA A100-SXM4-40GB", frozenset({"gpu", "eu"})
    )  # fmt: skip
    assert found.cpus >= 1 and found.memory_gib > 0


def test_without_nvml_a_worker_offers_no_gpu_and_refuses_a_bad_label() -> None:
    found = detect([])
    assert found.gpus == 0 and found.gpu_model is None  # no GPU, no pynvml on this machine
    with pytest.raises(ValueError, match="a worker label is"):
        detect(["Has Space"])


def test_a_submission_states_its_requirements_through_the_api(tmp_path: Any) -> None:
    from api.app import create_app
    from tests.unit.auth_helpers import admin_client
    from tests.unit.test_api import DOCKER, assert_error, make_service

    service = make_service(tmp_path)
    try:
        client = admin_client(create_app(service).test_client(), service)
        url = "/api/v1/tasks/sentiment/submissions"
        made = client.post(
            url,
            json={"name": "m", "runtime": DOCKER, "requirements": {"gpus": 1, "labels": ["eu"]}},
        )
        assert made.status_code == 201, made.get_json()
        shown = client.get(f"/api/v1/submissions/{made.get_json()['id']}").get_json()
        assert shown["requirements"] == {"gpus": 1, "labels": ["eu"]}
        plain = client.post(url, json={"name": "p", "runtime": DOCKER}).get_json()
        assert client.get(f"/api/v1/submissions/{plain['id']}").get_json()["requirements"] == {}
        nested = "{" + '"labels":' + "[" * 1000 + "]" * 1000 + "}"
        deep = client.post(
            url,
            data={"name": "d", "requirements": nested, "image": (io.BytesIO(b"x"), "m.tar")},
            content_type="multipart/form-data",
        )
        assert_error(deep, 422, "invalid_requirements")
        # anything but an object was invalid_submission, unlike the form (outside tester)
        bad_ones = ({"gpus": "one"}, {"colour": "red"}, {"labels": ["A B"]}, ["gpus"], [])
        for bad in (*bad_ones, "gpus=1", '{"gpus": 1}', 1, True):
            refused = client.post(url, json={"name": "b", "runtime": DOCKER, "requirements": bad})
            error = assert_error(refused, 422, "invalid_requirements")
            assert "requirements" in error["message"]
        with service.db.session() as session:
            from sqlalchemy import func, select

            from store.models import ModelRow

            assert session.scalar(select(func.count()).select_from(ModelRow)) == 2  # none kept
        # an embedded worker with no GPU leaves the GPU job queued, and runs the plain one
        claimed = service.store.claim("cpu-box", 600, capabilities=CPU_BOX)
        assert claimed is not None and claimed.model_id == plain["id"]
        assert service.store.claim("cpu-box", 600, capabilities=CPU_BOX) is None
    finally:
        service.close()


def test_the_cli_submits_requirements_and_refuses_bad_ones(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from client.cli import main
    from usecases.service import Service

    for name in ("DYNAEVAL_DATABASE_URL", "DYNAEVAL_STORE_URL", "DYNAEVAL_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "data"
    monkeypatch.setenv("DYNAEVAL_DATA_DIR", str(data))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    argv = ["submit", "registry.example.org/model:1", "--task", "sentiment", "--name", "m"]
    need = ["--require", "gpus=1", "--require", "labels=eu,fast", "--require", "gpu_model=A100"]
    assert main([*argv, *need]) == 0
    capsys.readouterr()
    service = Service.open(data)
    try:
        (made,) = service.queries.submissions()
        assert made["requirements"] == {"gpus": 1, "gpu_model": "A100", "labels": ["eu", "fast"]}
    finally:
        service.close()
    for bad, words in (("gpus=one", "whole number"), ("colour=red", "unknown requirement"),
                       ("gpus", "KEY=VALUE"), ("gpus=\uff11", "whole number"),
                       ("cpus=1_0", "whole number"), ("memory_gib=nan", "a number like"),
                       ("memory_gib=inf", "a number like"), ("labels=,", "separated by commas"),
                       ("labels=eu,,us", "separated by commas")):  # fmt: skip
        with pytest.raises(SystemExit):
            main([*argv, "--require", bad])
        assert words in capsys.readouterr().err
    assert main([*argv, "--require", "gpus=99"]) != 0
    assert "gpus must be a whole number" in capsys.readouterr().err
    assert main([*argv, "--require", "gpus=1", "--require", "gpus=2"]) != 0
    assert "given twice" in capsys.readouterr().err
    both = ["--require", "labels=eu", "--require", "labels=us", "--name", "two"]
    assert main([*argv[:-2], *both]) == 0
    capsys.readouterr()
    service = Service.open(data)
    try:
        labels = {s["name"]: s["requirements"].get("labels") for s in service.queries.submissions()}
        assert labels["two"] == ["eu", "us"]
    finally:
        service.close()


def test_the_cli_refuses_bad_requirements_before_it_uploads_to_a_server(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --server, --require was checked by the server after the whole image was
    uploaded, and each refusal left an upload behind (outside tester): now nothing is sent."""
    from client.cli import main

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("DYNAEVAL_API_KEY", "not-used")
    tarball = tmp_path / "m.tar"
    tarball.write_bytes(b"\0" * 1024)
    sent: list[str] = []
    monkeypatch.setattr("requests.Session.request", lambda *a, **k: sent.append(str(a[1:3])))
    argv = ["submit", str(tarball), "--task", "sentiment", "--name", "m"]
    for bad in ("gpus=99999999999999999999", "labels=EU", "gpu_model=A100"):
        code = main([*argv, "--server", "http://127.0.0.1:9", "--require", bad])
        assert code != 0 and "--require" in capsys.readouterr().err
    assert sent == []


def test_labelled_workers_route_the_queue_between_them(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two real workers drain one queue in burst mode: each job is run by a worker that
    meets its requirements, the plain ones by either, and none is left but the one nobody
    can run."""
    import threading

    from sqlalchemy import select

    from configs.vocabulary.results import EvaluationResult
    from store.blobs import LocalBlobStore
    from store.models import AttemptRow, JobRow
    from worker.progress import Progress
    from worker.worker import Worker

    monkeypatch.setenv("DYNAEVAL_LOCK_DIR", str(tmp_path / "locks"))

    class QuickWorker(Worker):
        def evaluate(self, job: Any, progress: Progress) -> EvaluationResult:
            return EvaluationResult(job.task, "done", summary={"performance": 1.0})

        def clean_leftovers(self) -> None:
            pass

    db = Database(f"sqlite:///{tmp_path / 'queue.sqlite3'}")
    store = JobStore(db)
    store.register_task("sentiment", 1, {"name": "sentiment"})
    jobs = {
        name: submit(store, name, needs)
        for name, needs in (
            ("plain-1", None), ("gpu", {"gpus": 1}), ("cpu-only", {"labels": ["cpu"]}),
            ("plain-2", None), ("eu-a100", {"gpus": 1, "labels": ["eu"], "gpu_model": "a100"}),
            ("nobody", {"gpus": 4}),
        )
    }  # fmt: skip
    workers = [
        QuickWorker(store, LocalBlobStore(tmp_path / "blobs"), {}, worker_id=name,
                    poll_s=0.01, capabilities=caps)
        for name, caps in (("cpu-box", CPU_BOX), ("gpu-box", GPU_BOX))
    ]  # fmt: skip
    threads = [threading.Thread(target=w.work, kwargs={"burst": True}) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    with db.session() as session:
        ran = {
            job_id: worker
            for job_id, worker in session.execute(select(AttemptRow.job_id, AttemptRow.worker))
        }
        status = dict(session.execute(select(JobRow.id, JobRow.status)).all())
    db.dispose()
    assert ran[jobs["gpu"]] == ran[jobs["eu-a100"]] == "gpu-box"
    assert ran[jobs["cpu-only"]] == "cpu-box"
    assert {ran[jobs["plain-1"]], ran[jobs["plain-2"]]} <= {"cpu-box", "gpu-box"}
    assert jobs["nobody"] not in ran and status[jobs["nobody"]] == "queued"
    assert sum(w.stats.done for w in workers) == 5


def test_the_worker_command_refuses_gpu_devices_it_cannot_use(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from client.cli import main

    monkeypatch.setenv("DYNAEVAL_DATA_DIR", str(tmp_path / "data"))
    for bad, words in (("zero", "an index or a GPU-"), (",", "at least one GPU")):
        assert main(["worker", "--burst", "--gpu-devices", bad]) != 0
        assert words in capsys.readouterr().err
    assert not (tmp_path / "data").exists()  # refused before anything was opened


def test_a_job_held_by_a_claimer_that_cannot_run_it_goes_to_one_that_can(
    store: JobStore,
) -> None:
    """The only queued job needs the label ``eu``. A worker without it is looking at it
    (on PostgreSQL its claim holds the row's lock until it commits, taking nothing); a
    worker with the label claims meanwhile: it waits for that claim and takes the job,
    rather than seeing no job it may take and leaving it for its next poll."""
    import threading
    import time

    from store.claims import claimable

    job = submit(store, "eu-only", {"labels": ["eu"]})
    eu_box = Capabilities(cpus=2, memory_gib=8.0, labels=frozenset({"eu"}))
    got: list[Any] = []
    with store.db.engine.begin() as connection:  # the label-less worker's claim, under way
        assert claimable(connection, store.clock.now(), CPU_BOX) is None
        claimer = threading.Thread(target=lambda: got.append(store.claim("eu", 600,
                                                                          capabilities=eu_box)))  # fmt: skip
        claimer.start()
        time.sleep(0.5)  # the other claims while this one is still open
    claimer.join(timeout=30)
    assert not claimer.is_alive()
    [claimed] = got
    assert claimed is not None and claimed.id == job
