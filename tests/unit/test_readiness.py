"""``/api/v1/ready``: 503 ``not_ready`` while a start's leaderboards are being prepared, 200
once every task's board is, so a load balancer sends the first viewer to a prepared board;
``/health`` (liveness) answers throughout."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy.exc import OperationalError

from api.app import create_app
from configs.vocabulary.clock import ManualClock
from tests.browser.seed import finish, result
from tests.unit.test_board_rows_incremental import wait_for
from usecases.boards import cache
from usecases.boards.cache import begin_warmup, boards_ready, keep_boards_warm
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


def outage() -> OperationalError:
    return OperationalError("SELECT 1", {}, Exception("connection refused"))


def test_a_database_outage_keeps_it_not_ready_until_the_board_is_prepared(
    service: Service, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    back = threading.Event()
    attempts: list[str] = []
    real = cache.prepare_board

    def failing(task: Any, *args: Any, **kwargs: Any) -> Any:
        if task.name == TASK and not back.is_set():
            attempts.append(task.name)
            raise outage()
        return real(task, *args, **kwargs)

    monkeypatch.setattr(cache, "prepare_board", failing)
    with warming(service):
        wait_for(lambda: len(attempts) >= 3)  # tried again and again, never ready
        for _ in range(3):
            assert client.get("/api/v1/ready").status_code == 503
        back.set()
        wait_for(lambda: client.get("/api/v1/ready").status_code == 200)


def test_a_board_that_cannot_be_prepared_for_good_does_not_hold_the_service_unready(
    service: Service,
    client: FlaskClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A task whose results this code cannot read fails for its viewers either way: every
    other board, and the rest of the API, must not wait for it."""
    real = cache.prepare_board
    attempts: list[str] = []

    def broken(task: Any, *args: Any, **kwargs: Any) -> Any:
        if task.name == TASK:
            attempts.append(task.name)
            raise ValueError("a result this code cannot read")
        return real(task, *args, **kwargs)

    monkeypatch.setattr(cache, "prepare_board", broken)
    with caplog.at_level(logging.DEBUG, logger=cache.LOG.name), warming(service):
        wait_for(lambda: client.get("/api/v1/ready").status_code == 200)
        wait_for(lambda: len(attempts) >= 3)  # still tried again
    said = [r for r in caplog.records if r.levelno == logging.WARNING and TASK in r.getMessage()]
    assert len(said) == 1, said  # said once, not every two seconds


@dataclasses.dataclass
class FlakyTasks(Mapping[str, Any]):
    """A task catalog whose first ``failures`` reads fail as a database outage does."""

    tasks: Mapping[str, Any]
    failures: int

    def _read(self) -> Mapping[str, Any]:
        if self.failures > 0:
            self.failures -= 1
            raise outage()
        return self.tasks

    def __getitem__(self, name: str) -> Any:
        return self._read()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())


def test_an_outage_while_reading_the_task_list_does_not_end_the_warm_up(
    service: Service, client: FlaskClient, caplog: pytest.LogCaptureFixture
) -> None:
    flaky = dataclasses.replace(service, tasks=FlakyTasks(service.tasks, failures=3))
    with caplog.at_level(logging.DEBUG, logger=cache.LOG.name), warming(flaky) as warmer:
        wait_for(lambda: flaky.tasks.failures == 0)  # type: ignore[attr-defined]
        assert warmer.is_alive()
        assert client.get("/api/v1/ready").status_code in (200, 503)
        wait_for(lambda: client.get("/api/v1/ready").status_code == 200)
    said = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1, said  # three failures in a row, said once


def test_not_ready_from_the_moment_serve_begins_the_warm_up(
    service: Service, client: FlaskClient
) -> None:
    """``serve`` says so before it listens: no request finds it ready before the warm-up
    thread has even started."""
    begin_warmup(service)
    assert client.get("/api/v1/ready").status_code == 503
    with warming(service):
        wait_for(lambda: client.get("/api/v1/ready").status_code == 200)
    begin_warmup(service)  # a warm-up begun again (another start on this database)
    assert client.get("/api/v1/ready").status_code == 503


def test_ready_stays_ready_once_every_board_was_prepared(
    service: Service, client: FlaskClient
) -> None:
    with warming(service):
        wait_for(lambda: boards_ready(service))
    assert client.get("/api/v1/ready").status_code == 200  # the warmer has stopped since


def test_a_stopping_server_is_not_ready_but_still_serves(service: Service) -> None:
    from api.routes import begin_stopping

    app = create_app(service)
    client = app.test_client()
    assert client.get("/api/v1/ready").status_code == 200
    begin_stopping(app)
    reply = client.get("/api/v1/ready")
    assert reply.status_code == 503 and reply.get_json()["error"]["code"] == "stopping"
    assert reply.headers["Retry-After"] == "1"
    assert client.get("/api/v1/health").status_code == 200
    assert client.get("/api/v1/tasks").status_code == 200
