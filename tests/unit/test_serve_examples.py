"""``serve`` queues the example models after it listens (client.examples), and the task list
says how many models are still queued or running."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from api.app import create_app
from client import examples
from usecases.service import Service, example_catalog


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    opened = Service.open(tmp_path / "data")
    try:
        yield opened
    finally:
        opened.close()


def test_the_background_thread_queues_every_example(
    service: Service, capsys: pytest.CaptureFixture[str]
) -> None:
    thread = examples.queue_examples_in_background(service, "process")
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert service.store.count_models() == len(example_catalog())
    assert service.queries.job_counts() == {"queued": len(example_catalog())}
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


def test_a_failed_build_when_docker_was_asked_queues_nothing(
    service: Service, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(examples, "docker_answers", lambda: True)
    monkeypatch.setattr(examples, "build_example_images", lambda: False)
    assert examples.queue_examples(service, "docker") == []
    assert service.store.count_models() == 0
    assert "not queueing the example models" in capsys.readouterr().out


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


def test_the_examples_show_as_queued_before_their_images_are_built(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    building = threading.Event()
    monkeypatch.setattr(examples, "docker_answers", lambda: True)
    monkeypatch.setattr(examples, "build_example_images", lambda: building.wait(30))
    thread = examples.queue_examples_in_background(service, "auto")
    try:
        # At once: every example is listed as queued, waiting for its image...
        assert service.store.count_models() == len(example_catalog())
        assert service.queries.job_counts() == {"queued": len(example_catalog())}
        assert service.store.claim("w", lease_s=60) is None  # ...and no worker may take one
    finally:
        building.set()
        thread.join(timeout=60)
    job = service.store.claim("w", lease_s=60)
    assert job is not None and job.runtime["kind"] == "docker"  # the built images run


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
