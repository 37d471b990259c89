"""Rate limits shared through the database: two API apps on one database draw from one
bucket per key, concurrent takes never hand out more than the budget (SQLite and
PostgreSQL), buckets refill on the injected clock, idle ones are pruned, and a database
that fails under the limiter is a 503, not a 500."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from sqlalchemy import func, select

from api import ratelimit
from api.app import create_app
from configs.vocabulary.clock import ManualClock
from store.db import Database
from store.models import RateLimitBucketRow
from store.ratelimits import RateLimits, SharedBuckets
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import assert_error
from tests.unit.test_api_server import unplug
from usecases.service import Service

TOKENS = "/api/v1/tokens"
LOGIN = "/api/v1/session"
BODY = {"name": "t", "scopes": ["read"]}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    yield database
    database.dispose()


@pytest.fixture
def apps(tmp_path: Path, database_url: str, clock: ManualClock) -> Iterator[list[Flask]]:
    """Two API apps (as two processes would run) on one database, each with its own data
    folder and its own in-memory state."""
    yield from _two_apps(tmp_path, database_url, clock)


@pytest.fixture
def sqlite_apps(tmp_path: Path, clock: ManualClock) -> Iterator[list[Flask]]:
    yield from _two_apps(tmp_path, f"sqlite:///{tmp_path / 'shared.sqlite3'}", clock)


def _two_apps(tmp_path: Path, url: str, clock: ManualClock) -> Iterator[list[Flask]]:
    services = [
        Service.open(tmp_path / f"data{n}", database_url=url, clock=clock) for n in range(2)
    ]
    for service in services:
        service.rate_limits = RateLimits(writes=3, writes_window_s=60, logins=2, logins_window_s=60)
    yield [create_app(service) for service in services]
    for service in services:
        service.close()


def _rows(db: Database) -> int:
    with db.session() as session:
        return int(session.scalar(select(func.count()).select_from(RateLimitBucketRow)) or 0)


def test_two_apps_on_one_database_share_the_write_budget(
    apps: list[Flask], clock: ManualClock
) -> None:
    token = issue_token(apps[0].extensions["dynaeval"], "alice", "researcher")
    first, second = (signed_in(app.test_client(), token) for app in apps)
    codes = [client.post(TOKENS, json=BODY).status_code for client in (first, second, first)]
    assert codes == [201, 201, 201]
    refused = second.post(TOKENS, json=BODY)  # the other process's bucket is the same one
    assert_error(refused, 429, "rate_limited")
    assert refused.headers["Retry-After"] == "20"
    assert first.post(TOKENS, json=BODY).status_code == 429
    clock.advance(20)  # one token back, for whichever process asks first
    assert second.post(TOKENS, json=BODY).status_code == 201
    assert first.post(TOKENS, json=BODY).status_code == 429


def test_two_apps_share_the_login_bucket_per_address(sqlite_apps: list[Flask]) -> None:
    apps = sqlite_apps

    def login(app: Flask, address: str) -> int:
        client = app.test_client()
        client.environ_base["REMOTE_ADDR"] = address
        return client.post(LOGIN, json={"name": "nobody", "password": "wrong"}).status_code

    assert [login(apps[0], "127.0.0.2"), login(apps[1], "127.0.0.2")] == [401, 401]
    assert login(apps[0], "127.0.0.2") == 429
    assert login(apps[1], "127.0.0.2") == 429
    assert login(apps[1], "127.0.0.3") == 401


def test_concurrent_takes_never_exceed_the_budget(database_url: str, clock: ManualClock) -> None:
    """16 threads, as two processes (two engines), 4 takes each on one key of budget 5."""
    databases = [Database(database_url, run_migrations=n == 0) for n in range(2)]
    try:
        buckets = [SharedBuckets(db, "writes", 5, 60.0, clock) for db in databases]
        barrier, granted, lock = threading.Barrier(16), [], threading.Lock()

        def hammer(index: int) -> None:
            barrier.wait()
            for _ in range(4):
                if buckets[index % 2].take("user:alice") == 0:
                    with lock:
                        granted.append(index)

        threads = [threading.Thread(target=hammer, args=(n,)) for n in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(granted) == 5
    finally:
        for db in databases:
            db.dispose()


def test_a_shared_bucket_refills_on_the_injected_clock(db: Database, clock: ManualClock) -> None:
    buckets = SharedBuckets(db, "writes", 2, 60.0, clock)
    assert buckets.take("k") == 0 and buckets.take("k") == 0
    assert buckets.take("k") == pytest.approx(30.0)
    assert buckets.take("other") == 0
    clock.advance(15)
    assert buckets.take("k") == pytest.approx(15.0)  # half a token is not one
    clock.advance(15)
    assert buckets.take("k") == 0
    clock.advance(3600)  # never more than a full bucket
    assert [buckets.take("k") for _ in range(3)][:2] == [0, 0]


def test_a_clock_set_back_adds_no_tokens(db: Database, clock: ManualClock) -> None:
    buckets = SharedBuckets(db, "writes", 1, 60.0, clock)
    assert buckets.take("k") == 0
    clock.advance(-600)
    assert buckets.take("k") > 0


def test_idle_buckets_are_pruned(db: Database, clock: ManualClock) -> None:
    writes = SharedBuckets(db, "writes", 2, 60.0, clock)
    logins = SharedBuckets(db, "logins", 2, 600.0, clock)
    for key in ("a", "b", "c"):
        writes.take(key)
        logins.take(key)
    assert _rows(db) == 6
    clock.advance(61)
    writes.take("d")  # full write buckets go; login buckets have a longer window
    assert _rows(db) == 4
    assert writes.take("a") == 0 and writes.take("a") == 0  # a pruned bucket is a full one


def test_a_database_outage_under_the_limiter_is_a_503(tmp_path: Path) -> None:
    service = Service.open(tmp_path / "data")
    try:
        client = create_app(service).test_client()  # anonymous: only the limiter asks the db
        unplug(service, tmp_path)
        response = client.post(LOGIN, json={"name": "erin", "password": "wrong"})
        assert_error(response, 503, "database_unavailable")
        assert int(response.headers["Retry-After"]) > 0
    finally:
        service.close()


def test_an_endpoint_can_be_marked_as_a_login(sqlite_apps: list[Flask]) -> None:
    app = sqlite_apps[0]
    endpoint = next(rule.endpoint for rule in app.url_map.iter_rules() if rule.rule == TOKENS)
    ratelimit.mark_logins(app, endpoint)  # an endpoint without the decorator
    token = issue_token(app.extensions["dynaeval"], "alice", "researcher")
    client = signed_in(app.test_client(), token)
    assert [client.post(TOKENS, json=BODY).status_code for _ in range(3)] == [201, 201, 429]
