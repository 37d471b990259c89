"""The quota holds under concurrency: the check and the insert happen under one named lock
per (user, task) shared by every process on the database, so 8 concurrent submissions
against a quota of 2 give exactly 2 submissions, and the refused uploads leave nothing on
disk (SQLite and PostgreSQL). The lock itself holds across processes."""

from __future__ import annotations

import dataclasses
import io
import multiprocessing
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import func, select

from api.app import create_app
from configs.schema import QuotaSpec
from store.db import Database
from store.locks import named_lock, slot_of
from store.models import ModelRow
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import DOCKER, image_tar
from usecases.service import Service

pytestmark = pytest.mark.slow  # measured, fuzzed or multi-process: the full lane only

URL = "/api/v1/tasks/sentiment/submissions"
ROUNDS = 40  # read-modify-write rounds per process in the cross-process lock test


@pytest.fixture
def apps(tmp_path: Path, database_url: str) -> Iterator[list[Flask]]:
    """Two API apps on one database (as two processes), the task's total quota 2."""
    services = [Service.open(tmp_path / f"d{n}", database_url=database_url) for n in range(2)]
    for service in services:
        task = service.tasks["sentiment"]
        service.tasks["sentiment"] = dataclasses.replace(task, quotas=QuotaSpec(total=2))
    yield [create_app(service) for service in services]
    for service in services:
        service.close()


def _concurrently(apps: list[Flask], send: Any, count: int = 8) -> list[Any]:
    """``send(client)`` from ``count`` threads released together, alternating apps."""
    token = issue_token(apps[0].extensions["dynaeval"], "alice", "researcher")
    clients = [signed_in(apps[n % 2].test_client(), token) for n in range(count)]
    barrier, replies = threading.Barrier(count), [None] * count

    def run(index: int) -> None:
        barrier.wait()
        replies[index] = send(clients[index])

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return replies


def _models(app: Flask) -> int:
    with app.extensions["dynaeval"].db.session() as session:
        return int(session.scalar(select(func.count()).select_from(ModelRow)) or 0)


def _stored_files(app: Flask) -> list[Path]:
    root = Path(app.extensions["dynaeval"].blobs.root)
    return [path for path in root.rglob("*") if path.is_file()]


def test_concurrent_uploads_take_exactly_the_quota(apps: list[Flask]) -> None:
    tarball = image_tar()

    def send(client: Any) -> Any:
        form = {"name": "m", "protocol": "v1", "image": (io.BytesIO(tarball), "model.tar")}
        return client.post(URL, data=form, content_type="multipart/form-data")

    replies = _concurrently(apps, send)
    codes = sorted(reply.status_code for reply in replies)
    assert codes == [201] * 2 + [429] * 6
    refused = [reply.get_json()["error"]["code"] for reply in replies if reply.status_code == 429]
    assert set(refused) == {"quota_exceeded"}
    assert _models(apps[0]) == 2
    # each app stores in its own data folder: only the two accepted tarballs remain
    assert len(_stored_files(apps[0])) + len(_stored_files(apps[1])) == 2


def test_concurrent_references_take_exactly_the_quota(apps: list[Flask]) -> None:
    body = {"name": "m", "runtime": {**DOCKER, "image": "ghcr.io/team/model:1"}}
    replies = _concurrently(apps, lambda client: client.post(URL, json=body))
    assert sorted(reply.status_code for reply in replies) == [201] * 2 + [429] * 6
    assert _models(apps[0]) == 2


def _bump_under_lock(url: str, counter: str, rounds: int, ready: Any, go: Any) -> None:
    """Read, yield the CPU, write back +1, ``rounds`` times, under the named lock; starts
    when both processes are ``ready``."""
    db = Database(url, run_migrations=False)
    try:
        ready.set()
        go.wait(60)
        for _ in range(rounds):
            with named_lock(db, "quota:alice:sentiment"):
                value = int(Path(counter).read_text())
                threading.Event().wait(0.001)  # widen the window a lost update needs
                Path(counter).write_text(str(value + 1))
    finally:
        db.dispose()


def test_the_named_lock_holds_across_processes(database_url: str, tmp_path: Path) -> None:
    Database(database_url).dispose()  # migrated once, before the processes start
    counter = tmp_path / "counter"
    counter.write_text("0")
    context = multiprocessing.get_context("spawn")
    ready, go, here = context.Event(), context.Event(), threading.Event()
    args = (database_url, str(counter), ROUNDS, ready, go)
    other = context.Process(target=_bump_under_lock, args=args)
    other.start()
    assert ready.wait(60)
    go.set()
    _bump_under_lock(database_url, str(counter), ROUNDS, here, go)
    other.join(timeout=120)
    assert other.exitcode == 0
    assert int(counter.read_text()) == 2 * ROUNDS


def test_names_map_to_stable_slots() -> None:
    assert slot_of("quota:a:t") == slot_of("quota:a:t")
    assert slot_of("quota:a:t") != slot_of("quota:b:t")
