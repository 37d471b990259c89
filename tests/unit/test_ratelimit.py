"""Rate limits: token buckets on a manual clock; every write per user, logins per client
address; 429 ``rate_limited`` with Retry-After, documented in OpenAPI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask

from api.app import create_app
from api.ratelimit import TokenBuckets
from configs.vocabulary.clock import ManualClock
from store.accounts import Accounts
from store.ratelimits import RateLimits
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import assert_error
from usecases.service import Service

TOKENS = "/api/v1/tokens"
LOGIN = "/api/v1/session"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def app(tmp_path: Path, clock: ManualClock) -> Iterator[Flask]:
    service = Service.open(tmp_path / "data", clock=clock)
    service.rate_limits = RateLimits(writes=2, writes_window_s=60, logins=3, logins_window_s=60)
    Accounts(service.db, clock).add_user("erin", "researcher", password="correct horse battery")
    yield create_app(service)
    service.close()


def _token(app: Flask, name: str) -> str:
    return issue_token(app.extensions["dynaeval"], name, "researcher")


def test_a_bucket_refills_evenly_over_its_window(clock: ManualClock) -> None:
    buckets = TokenBuckets(2, 60.0, clock)
    assert buckets.take("k") == 0 and buckets.take("k") == 0
    assert buckets.take("k") == pytest.approx(30.0)
    assert buckets.take("other") == 0  # keys do not share
    clock.advance(30)
    assert buckets.take("k") == 0
    assert buckets.take("k") == pytest.approx(30.0)


def test_the_write_past_the_limit_is_429_until_the_clock_moves(
    app: Flask, clock: ManualClock
) -> None:
    alice = signed_in(app.test_client(), _token(app, "alice"))
    body = {"name": "t", "scopes": ["read"]}
    assert [alice.post(TOKENS, json=body).status_code for _ in range(2)] == [201, 201]
    refused = alice.post(TOKENS, json=body)
    error = assert_error(refused, 429, "rate_limited")
    assert refused.headers["Retry-After"] == "30"
    assert "30 s" in error["message"]
    assert alice.get(TOKENS).status_code == 200  # reads are not limited
    clock.advance(30)
    assert alice.post(TOKENS, json=body).status_code == 201


def test_writes_are_counted_per_user(app: Flask) -> None:
    alice = signed_in(app.test_client(), _token(app, "alice"))
    bob = signed_in(app.test_client(), _token(app, "bob"))
    body = {"name": "t", "scopes": ["read"]}
    for _ in range(2):
        alice.post(TOKENS, json=body)
    assert alice.post(TOKENS, json=body).status_code == 429
    assert bob.post(TOKENS, json=body).status_code == 201


def test_logins_are_limited_per_client_address(app: Flask, clock: ManualClock) -> None:
    def login(address: str, password: str = "wrong") -> int:
        client = app.test_client()
        client.environ_base["REMOTE_ADDR"] = address
        response = client.post(LOGIN, json={"name": "erin", "password": password})
        return response.status_code

    assert [login("127.0.0.2") for _ in range(3)] == [401, 401, 401]
    assert login("127.0.0.2", "correct horse battery") == 429  # even the right password
    assert login("127.0.0.3", "correct horse battery") == 200
    clock.advance(20)
    assert login("127.0.0.2", "correct horse battery") == 200


def test_the_429_is_documented_with_retry_after_on_writes(app: Flask) -> None:
    spec = app.test_client().get("/api/v1/openapi.json").get_json()
    for path, method in (
        (TOKENS, "post"),
        (LOGIN, "post"),
        ("/api/v1/tokens/{token_id}", "delete"),
    ):
        response = spec["paths"][path][method]["responses"]["429"]
        assert "Retry-After" in response["headers"]
        assert response["content"]["application/json"]["schema"]["$ref"].endswith("/Error")
    assert "429" not in spec["paths"][TOKENS]["get"]["responses"]
