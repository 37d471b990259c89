"""``serve`` queues the example models after it listens (client.examples), and the task list
says how many models are still queued or running."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.app import create_app
from client import examples
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import JobStatus, Settlement
from configs.vocabulary.results import EvaluationResult, Failure
from store.jobs import ClaimedJob
from tests.conftest import wait_until
from usecases.service import Service, example_catalog, example_image


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    opened = Service.open(tmp_path / "data")
    try:
        yield opened
    finally:
        opened.close()


def test_the_background_thread_queues_every_example(
    service: Service, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stop = threading.Event()
    followed: list[examples.Releases] = []

    def follow(service: Service, held: object, releases: examples.Releases, **_: object) -> None:
        followed.append(releases)

    monkeypatch.setattr(examples, "follow_examples", follow)
    thread = examples.queue_examples_in_background(service, "process", stop)
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert service.store.count_models() == len(example_catalog())
    assert service.queries.job_counts() == {"queued": len(example_catalog())}
    [releases] = followed  # each released model is told to the follower, then the end
    told = [releases.get_nowait() for _ in range(releases.qsize())]
    assert told[-1] is None and all(item is not None and item[1] for item in told[:-1])
    assert len(told) == len(example_catalog()) + 1
    assert f"queued {len(example_catalog())} example models (process runtime)" in (
        capsys.readouterr().out
    )


def test_docker_asked_without_an_engine_is_refused_before_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(examples, "docker_answers", lambda: False)
    with pytest.raises(RuntimeError):
        examples.check_example_runtime("docker")
    examples.check_example_runtime("auto")  # auto falls back to processes later
    examples.check_example_runtime("process")


def test_a_failed_base_image_when_docker_was_asked_queues_nothing(
    service: Service, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(examples, "docker_answers", lambda: True)
    monkeypatch.setattr(examples, "build_base_image", fail_build)
    assert examples.queue_examples(service, "docker") == []
    assert service.store.count_models() == 0
    assert "not queueing the example models: the base image did not build (no space left)" in (
        capsys.readouterr().out
    )


def test_a_failed_base_image_with_auto_runs_every_example_as_a_process(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(examples, "docker_answers", lambda: True)
    monkeypatch.setattr(examples, "build_base_image", fail_build)
    assert len(examples.queue_examples(service, "auto")) == len(example_catalog())
    assert claimed_runtimes(service) == {"process": len(example_catalog())}


@pytest.mark.parametrize("choice", ["auto", "docker"])
def test_an_image_that_fails_leaves_only_its_own_models_out_of_the_containers(
    service: Service,
    monkeypatch: pytest.MonkeyPatch,
    choice: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    broken = next(e for e in example_catalog() if not e.get("args"))
    monkeypatch.setattr(examples, "docker_answers", lambda: True)
    monkeypatch.setattr(examples, "build_base_image", lambda: None)
    monkeypatch.setattr(
        examples, "build_image", lambda entry: fail_build() if entry == broken else None
    )
    lines: list[str] = []
    held = service.hold_examples()
    started = examples.start_examples(service, held, choice, progress=lines.append)
    others = len(example_catalog()) - 1
    if choice == "auto":  # the broken one is evaluated all the same, as a local process
        assert len(started) == len(example_catalog())
        assert f"queued {len(started)} example models (docker runtime, 1 as local processes)" in (
            capsys.readouterr().out
        )
        assert claimed_runtimes(service) == {"docker": others, "process": 1}
        assert any(f"{broken['task']}/{broken['name']} run as processes" in x for x in lines)
    else:  # docker or nothing: the broken one is removed, nothing half-queued stays
        assert len(started) == others == service.store.count_models()
        assert f"queued {others} example models (docker runtime)" in capsys.readouterr().out
        assert claimed_runtimes(service) == {"docker": others}
        assert any(f"{broken['task']}/{broken['name']} not queued" in x for x in lines)


def fail_build(*_: object) -> None:
    raise examples.subprocess.CalledProcessError(1, ["docker"], stderr=b"step 2\nno space left")


def claimed_runtimes(service: Service) -> dict[str, int]:
    kinds: dict[str, int] = {}
    while (job := service.store.claim("w", lease_s=60)) is not None:
        kinds[job.runtime["kind"]] = kinds.get(job.runtime["kind"], 0) + 1
    return kinds


def test_the_task_list_shows_queued_and_running_models(service: Service) -> None:
    client = create_app(service).test_client()
    html = client.get("/", headers={"Accept": "text/html"}).get_data(as_text=True)
    assert "queued: " not in html  # nothing waits: no line
    service.queue_examples("process")
    html = client.get("/", headers={"Accept": "text/html"}).get_data(as_text=True)
    per_task: dict[str, int] = {}
    for entry in example_catalog():
        per_task[entry["task"]] = per_task.get(entry["task"], 0) + 1
    for count in set(per_task.values()):
        assert f"queued: {count}, running: 0" in html


def test_each_example_is_queued_as_soon_as_its_own_image_is_built(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    images = list(dict.fromkeys(example_image(e) for e in example_catalog()))
    built = {image: threading.Event() for image in images}
    monkeypatch.setattr(examples, "docker_answers", lambda: True)
    monkeypatch.setattr(examples, "build_base_image", lambda: None)
    monkeypatch.setattr(examples, "build_image", lambda entry: built[example_image(entry)].wait(30))
    stop = threading.Event()
    thread = examples.queue_examples_in_background(service, "auto", stop)
    try:
        # At once: every example is listed as queued, waiting for its image...
        assert service.store.count_models() == len(example_catalog())
        assert service.queries.job_counts() == {"queued": len(example_catalog())}
        assert service.store.claim("w", lease_s=60) is None  # ...and no worker may take one
        # the first image built: its model may be taken while the others still build
        first = next(e for e in example_catalog() if example_image(e) == images[0])
        built[images[0]].set()
        claimed: list[ClaimedJob | None] = []
        wait_until(
            lambda: claimed.append(service.store.claim("w", lease_s=60)) or bool(claimed[-1]),
            what="the first image's model released",
        )
        job = claimed[-1]
        assert job is not None and job.task == first["task"]
        assert job.runtime["kind"] == "docker" and job.runtime["image"] == images[0]
        assert service.store.claim("w", lease_s=60) is None
    finally:
        for event in built.values():
            event.set()
        stop.set()  # the thread then says each model as it is scored: none will be here
        thread.join(timeout=60)
        assert not thread.is_alive()
    assert claimed_runtimes(service) == {"docker": len(example_catalog()) - 1}


def test_start_held_and_discard_held_only_touch_held_jobs(service: Service) -> None:
    held, _ = service.store.submit(
        "sentiment", "h", {"kind": "process", "command": ["x"]}, held=True
    )
    plain, _ = service.store.submit("sentiment", "p", {"kind": "process", "command": ["x"]})
    assert not service.store.start_held(plain) and not service.store.discard_held(plain)
    shown = service.queries.submission(held)
    assert shown is not None and shown["job"]["stage"] == "queued: waiting for its image to build"
    assert service.store.discard_held(held)
    assert not service.store.start_held(held)  # gone: model and job
    assert service.store.count_models() == 1


def released(started: list[str]) -> examples.Releases:
    """What a start that released ``started`` tells its follower."""
    told: examples.Releases = queue.SimpleQueue()
    for model_id in started:
        told.put((model_id, True))
    told.put(None)
    return told


def test_the_console_says_each_example_as_it_is_scored_or_fails(service: Service) -> None:
    held = service.hold_examples()
    started = examples.start_examples(service, held, "process", progress=lambda line: None)
    second = started[1]
    lines: list[str] = []
    looks: list[float] = []

    def finish_one_each_look(seconds: float) -> bool:
        looks.append(seconds)
        job = service.store.claim("w", lease_s=60)
        assert job is not None and job.model_id is not None
        if job.model_id == second:
            crashed = Failure(FailureCode.CRASHED, "exit 3")
            failed = Settlement(JobStatus.FAILED, None, "failed")
            assert service.store.fail(job.id, "w", crashed, failed, lease=job.lease)
        else:
            done = EvaluationResult(job.task, "done", summary={"performance": 0.5})
            assert service.store.finish(job.id, "w", done, lease=job.lease)
        return False

    examples.follow_examples(
        service, held, released(started), lines.append, wait=finish_one_each_look
    )
    assert len(looks) == len(started)
    entry = held[second]
    said = [line for line in lines if line.startswith(f"{entry['task']}/{entry['name']} (")]
    assert len(said) == 1 and said[0].endswith(f"/{len(started)}) failed: crashed: exit 3")
    assert sum(line.startswith("scored ") for line in lines) == len(started) - 1
    assert (
        lines[-1] == f"every example model evaluated: {len(started) - 1} of {len(started)} scored"
    )


def test_following_ends_when_a_stop_is_asked_for(service: Service) -> None:
    held = service.hold_examples()
    started = examples.start_examples(service, held, "process", progress=lambda line: None)
    lines: list[str] = []
    examples.follow_examples(service, held, released(started), lines.append, wait=lambda _: True)
    assert lines == []  # nothing evaluated, nothing said, and no wait for it


def test_a_database_outage_while_releasing_leaves_no_example_held(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release that meets an outage is tried again: a model left held would be listed as
    queued for good, and the console would have said it was queued."""
    from sqlalchemy.exc import OperationalError

    monkeypatch.setattr(examples, "docker_answers", lambda: True)
    monkeypatch.setattr(examples, "build_base_image", lambda: None)
    monkeypatch.setattr(examples, "build_image", lambda entry: None)
    monkeypatch.setattr(examples, "RELEASE_RETRY_S", 0.0)
    store_type = type(service.store)
    start_held = store_type.start_held
    calls: list[str] = []

    def out_once(store: Any, model_id: str, runtime: Any = None) -> bool:
        calls.append(model_id)
        if len(calls) == 2:
            raise OperationalError("UPDATE jobs", {}, Exception("server closed the connection"))
        return start_held(store, model_id, runtime)

    monkeypatch.setattr(store_type, "start_held", out_once)
    lines: list[str] = []
    held = service.hold_examples()
    started = examples.start_examples(service, held, "docker", progress=lines.append)
    assert sorted(started) == sorted(held) and len(calls) == len(held) + 1
    assert claimed_runtimes(service) == {"docker": len(held)}
    assert sum(line.startswith("built ") for line in lines) == len(
        {example_image(e) for e in held.values()}
    )


def test_examples_a_stopped_first_start_left_held_are_released_by_the_next(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first start stopped while the images built leaves its examples held (listed as
    queued, taken by no worker); the next start releases them instead of leaving them."""
    held = service.hold_examples()
    first = next(iter(held))
    assert service.store.start_held(first)  # released before the stop
    stray, _ = service.store.submit(
        "sentiment", "gone-from-the-catalog", {"kind": "process", "command": ["x"]}, held=True
    )
    left = service.held_examples()
    assert set(left) == set(held) - {first}
    assert all(left[model_id] == held[model_id] for model_id in left)
    assert service.queries.submission(stray) is None  # never ran: removed
    monkeypatch.setattr(examples, "follow_examples", lambda *args, **kwargs: None)
    thread = examples.queue_examples_in_background(service, "process", threading.Event(), left)
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert claimed_runtimes(service) == {"process": len(held)}
    assert service.store.count_models() == len(held)  # none submitted twice
    assert service.held_examples() == {}


def test_the_console_says_the_first_model_scored_while_other_images_still_build(
    service: Service, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A first start's console says each model as it is scored from the first on, not in a
    burst once the last image is built."""
    images = list(dict.fromkeys(example_image(e) for e in example_catalog()))
    built = {image: threading.Event() for image in images}
    monkeypatch.setattr(examples, "docker_answers", lambda: True)
    monkeypatch.setattr(examples, "build_base_image", lambda: None)
    monkeypatch.setattr(examples, "build_image", lambda entry: built[example_image(entry)].wait(30))
    stop = threading.Event()
    thread = examples.queue_examples_in_background(service, "auto", stop)
    said: list[str] = []
    try:
        built[images[0]].set()
        claimed: list[ClaimedJob | None] = []
        wait_until(
            lambda: claimed.append(service.store.claim("w", lease_s=60)) or bool(claimed[-1]),
            what="the first image's model released",
        )
        job = claimed[-1]
        assert job is not None and job.model_id is not None
        done = EvaluationResult(job.task, "done", summary={"performance": 0.5})
        assert service.store.finish(job.id, "w", done, lease=job.lease)
        wait_until(
            lambda: said.append(capsys.readouterr().out) or "scored " in "".join(said),
            what="the first model said as scored",
        )
        assert service.store.claim("w", lease_s=60) is None  # the others still wait to build
    finally:
        for event in built.values():
            event.set()
        stop.set()
        thread.join(timeout=60)
        assert not thread.is_alive()
    entry = next(e for e in example_catalog() if example_image(e) == images[0])
    assert f"scored {entry['task']}/{entry['name']} (1/{len(example_catalog())})" in "".join(said)


def test_a_removed_example_leaves_the_count(service: Service) -> None:
    """Counts are of the examples still meant to run: one removed (its image failed with
    ``docker`` asked for) is not waited for."""
    held = service.hold_examples()
    first, removed, *rest = held
    told: examples.Releases = queue.SimpleQueue()
    told.put((first, True))
    told.put((removed, False))
    for model_id in rest:
        told.put((model_id, False))
    told.put(None)
    entry = held[first]
    assert said_when_the_first_is_scored(service, held, told) == [
        f"scored {entry['task']}/{entry['name']} (1/1)",
        "every example model evaluated: 1 of 1 scored",
    ]


def said_when_the_first_is_scored(
    service: Service, held: examples.Held, told: examples.Releases
) -> list[str]:
    """The console's lines when only the first held example is released and scored, and
    the start tells its follower ``told``."""
    first = next(iter(held))
    started = examples.start_examples(service, {first: held[first]}, "process", lambda _: None)
    assert started == [first]
    job = service.store.claim("w", lease_s=60)
    assert job is not None
    assert service.store.finish(
        job.id,
        "w",
        EvaluationResult(job.task, "done", summary={"performance": 1.0}),
        lease=job.lease,
    )
    lines: list[str] = []
    examples.follow_examples(service, held, told, lines.append, wait=lambda _: False)
    return lines


def test_a_start_that_fails_half_way_counts_only_what_it_released(service: Service) -> None:
    """The models a failed start never reached are not waited for, nor counted."""
    held = service.hold_examples()
    first = next(iter(held))
    told: examples.Releases = queue.SimpleQueue()
    told.put((first, True))
    told.put(None)  # what queue_examples_in_background says when the start raised
    entry = held[first]
    assert said_when_the_first_is_scored(service, held, told) == [
        f"scored {entry['task']}/{entry['name']} (1/1)",
        "every example model evaluated: 1 of 1 scored",
    ]
