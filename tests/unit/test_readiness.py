"""``/api/v1/ready``: 503 ``not_ready`` while a start's leaderboards are being prepared, 200
once every task's board is, so a load balancer sends the first viewer to a prepared board;
``/health`` (liveness) answers throughout."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from api.app import create_app
from configs.vocabulary.clock import ManualClock
from tests.browser.seed import finish, result
from usecases.boards import cache
from usecases.boards.cache import boards_ready, keep_boards_warm
from usecases.service import Service

TASK = "sentiment"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = Service.open(tmp_path / "data", clock=ManualClock())
    evaluation = result(svc, [60.0] * 3, 100.0, 0.5, 90.0, 90.0, seed=1)
    finish(svc, "m0", evaluation)
    yield svc
    svc.close()


@pytest.fixture
def client(service: Service) -> FlaskClient:
    return create_app(service).test_client()


@contextlib.contextmanager
def warming(service: Service) -> Iterator[threading.Thread]:
    """``keep_boards_warm`` on its own thread (every 10 ms), stopped and joined after."""
    stop = threading.Event()
    warmer = threading.Thread(target=keep_boards_warm, args=(service, stop, 0.01), daemon=True)
    warmer.start()
    try:
        yield warmer
    finally:
        stop.set()
        warmer.join(timeout=10)
    assert not warmer.is_alive()


def wait_for(condition: Callable[[], bool]) -> None:
    pause = threading.Event()
    for _ in range(1000):  # bounded: 10 s at most
        if condition():
            return
        pause.wait(0.01)
    raise AssertionError("never got there")


def test_ready_without_a_warmer_prepares_on_request_as_ever(client: FlaskClient) -> None:
    reply = client.get("/api/v1/ready")
    assert reply.status_code == 200 and reply.get_json() == {"status": "ready"}


def test_not_ready_while_a_board_is_being_prepared_then_ready(
    service: Service, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    entered = threading.Event()
    real = cache.prepare_board

    def held(task: Any, *args: Any, **kwargs: Any) -> Any:
        if task.name == TASK:
            entered.set()
            assert release.wait(10)
        return real(task, *args, **kwargs)

    monkeypatch.setattr(cache, "prepare_board", held)
    with warming(service):
        assert entered.wait(10)
        reply = client.get("/api/v1/ready")
        assert reply.status_code == 503
        assert reply.get_json()["error"]["code"] == "not_ready"
        assert reply.headers["Retry-After"] == "1"
        health = client.get("/api/v1/health")  # alive all along
        assert health.status_code == 200
        release.set()
        wait_for(lambda: client.get("/api/v1/ready").status_code == 200)
        assert boards_ready(service)
        assert service.tasks[TASK].name in cache.cache_of(service).kept_tried


def test_a_board_that_failed_to_prepare_keeps_it_not_ready_until_it_is(
    service: Service, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = [RuntimeError("the database went away")] * 3
    real = cache.prepare_board

    def failing(task: Any, *args: Any, **kwargs: Any) -> Any:
        if task.name == TASK and failures:
            raise failures.pop()
        return real(task, *args, **kwargs)

    monkeypatch.setattr(cache, "prepare_board", failing)
    with warming(service):
        wait_for(lambda: len(failures) < 3)  # the first attempt failed
        if failures:  # still failing: not ready (after the third, it may be)
            assert client.get("/api/v1/ready").status_code == 503
        wait_for(lambda: client.get("/api/v1/ready").status_code == 200)
    assert not failures


def test_ready_stays_ready_once_every_board_was_prepared(
    service: Service, client: FlaskClient
) -> None:
    with warming(service):
        wait_for(lambda: boards_ready(service))
    assert client.get("/api/v1/ready").status_code == 200  # the warmer has stopped since
