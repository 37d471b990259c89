"""The webhook routes through the real app: every role against every route (someone else's
webhook and a guessed id are 404), the secret shown once, URL checks (422 unless the
operator allow-lists the host), and deliveries as the owner sees them."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.serving import make_server

import store.webhooks
from api.app import create_app
from client.sdk import ApiClientError, DynaevalClient, verify_signature
from configs.vocabulary.clock import ManualClock
from store.accounts import Accounts
from store.webhooks import WebhookStore
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import AXES_A, assert_error, finished
from tests.unit.test_webhooks_delivery import Receiver
from usecases.service import Service
from worker.webhooks import WebhookSender

ROLES = ("anonymous", "alice", "bob", "admin", "alice_read", "alice_submit")
HOOK = {"url": "https://hooks.example.com/ci"}


@dataclass
class World:
    app: Flask
    service: Service
    tokens: dict[str, str]
    ids: dict[str, str]

    def client(self, role: str) -> FlaskClient:
        client = self.app.test_client()
        return client if role == "anonymous" else signed_in(client, self.tokens[role])

    def user_id(self, name: str) -> str:
        found = Accounts(self.service.db).user_by_name(name)
        assert found is not None
        return str(found["id"])

    @property
    def hooks(self) -> WebhookStore:
        return WebhookStore(self.service.db, self.service.sealer, self.service.clock)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    service = Service.open(tmp_path / "data", clock=ManualClock())
    tokens = {
        "admin": issue_token(service, "admin", "admin"),
        "alice": issue_token(service, "alice", "researcher"),
        "bob": issue_token(service, "bob", "researcher"),
        "alice_read": issue_token(service, "alice", scopes=["read"]),
        "alice_submit": issue_token(service, "alice", scopes=["submit"]),
    }
    ids = {}
    for name in ("alice", "bob"):
        ids[name] = finished(service, f"{name}-model", AXES_A)
        owner = Accounts(service.db).user_by_name(name)
        assert owner is not None
        Accounts(service.db).set_model_owner(ids[name], owner["id"])
    yield World(create_app(service), service, tokens, ids)
    service.close()


OWNER_ONLY = {"anonymous": 401, "alice_read": 403, "bob": 404}  # alice's hook; else 2xx


def test_every_role_against_every_webhook_route(world: World) -> None:
    for role in ROLES:
        client = world.client(role)
        hook, _ = world.hooks.create(world.user_id("alice"), HOOK["url"], ["done"])
        for method, path, success in (
            ("GET", f"/api/v1/webhooks/{hook.id}", 200),
            ("GET", f"/api/v1/webhooks/{hook.id}/deliveries", 200),
            ("POST", f"/api/v1/webhooks/{hook.id}/test", 202),
            ("POST", f"/api/v1/webhooks/{hook.id}/rotate-secret", 200),
            ("DELETE", f"/api/v1/webhooks/{hook.id}", 200),
        ):
            _expect(client.open(path, method=method), OWNER_ONLY.get(role, success), role, path)
        guessed = str(uuid.uuid4())
        for method, path in (
            ("GET", f"/api/v1/webhooks/{guessed}"),
            ("DELETE", f"/api/v1/webhooks/{guessed}"),
            ("GET", f"/api/v1/webhooks/{guessed}/deliveries"),
            ("POST", f"/api/v1/webhooks/{guessed}/test"),
            ("POST", f"/api/v1/webhooks/{guessed}/rotate-secret"),
        ):
            expected = {"anonymous": 401, "alice_read": 403}.get(role, 404)
            _expect(client.open(path, method=method), expected, role, path)
        signed_out = {"anonymous": 401, "alice_read": 403}
        _expect(client.get("/api/v1/webhooks"), signed_out.get(role, 200), role, "list")
        everyone = {"anonymous": 401, "alice_read": 403, "admin": 200}.get(role, 403)
        _expect(client.get("/api/v1/webhooks?all=true"), everyone, role, "all")
        _expect(client.post("/api/v1/webhooks", json=HOOK), signed_out.get(role, 201), role, "new")
        on_bob = {**signed_out, "bob": 201, "admin": 201}.get(role, 404)
        body = {**HOOK, "model_id": world.ids["bob"]}
        _expect(client.post("/api/v1/webhooks", json=body), on_bob, role, "on bob's")
        body = {**HOOK, "model_id": guessed}
        _expect(client.post("/api/v1/webhooks", json=body), signed_out.get(role, 404), role, "?")


def _expect(response: Any, status: int, role: str, what: str) -> None:
    assert response.status_code == status, (role, what, response.get_data(as_text=True))
    if status >= 400:
        assert_error(response, status)


def test_lists_show_only_the_callers_and_never_a_secret(world: World) -> None:
    alice, bob = world.client("alice"), world.client("bob")
    made = alice.post("/api/v1/webhooks", json=HOOK)
    assert made.status_code == 201
    created = made.get_json()
    assert created["secret"].startswith("whsec_") and created["events"] == [
        "done",
        "failed",
        "cancelled",
    ]
    bob.post("/api/v1/webhooks", json={**HOOK, "events": ["done"]})
    mine = alice.get("/api/v1/webhooks").get_json()["webhooks"]
    assert [h["id"] for h in mine] == [created["id"]]
    everyone = world.client("admin").get("/api/v1/webhooks?all=true").get_json()["webhooks"]
    assert len(everyone) == 2
    shown = alice.get(f"/api/v1/webhooks/{created['id']}").get_data(as_text=True)
    assert created["secret"] not in shown and "secret" not in shown
    assert created["secret"] not in str(everyone)
    rotated = alice.post(f"/api/v1/webhooks/{created['id']}/rotate-secret").get_json()
    assert rotated["secret"].startswith("whsec_") and rotated["secret"] != created["secret"]
    assert alice.delete(f"/api/v1/webhooks/{created['id']}").status_code == 200
    assert_error(alice.get(f"/api/v1/webhooks/{created['id']}"), 404, "unknown_webhook")


def test_local_urls_are_refused_unless_allow_listed(world: World) -> None:
    alice = world.client("alice")
    for url in ("http://127.0.0.1:9/x", "http://169.254.169.254/", "http://[::1]/", "file:///x"):
        refused = alice.post("/api/v1/webhooks", json={"url": url})
        assert_error(refused, 422, "invalid_url")
    for events in ([], ["queued"], "done"):
        assert_error(alice.post("/api/v1/webhooks", json={**HOOK, "events": events}), 422)
    world.app.config["DYNAEVAL_WEBHOOK_ALLOW_HOSTS"] = ["127.0.0.1"]
    assert alice.post("/api/v1/webhooks", json={"url": "http://127.0.0.1:9/x"}).status_code == 201


def test_too_many_webhooks_is_a_conflict(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store.webhooks, "MAX_PER_USER", 2)
    alice = world.client("alice")
    for _ in range(2):
        assert alice.post("/api/v1/webhooks", json=HOOK).status_code == 201
    assert_error(alice.post("/api/v1/webhooks", json=HOOK), 409, "too_many_webhooks")
    assert world.client("bob").post("/api/v1/webhooks", json=HOOK).status_code == 201


def test_a_test_ping_shows_in_the_deliveries(world: World) -> None:
    receiver = Receiver([500])
    try:
        world.app.config["DYNAEVAL_WEBHOOK_ALLOW_HOSTS"] = ["127.0.0.1"]
        alice = world.client("alice")
        hook = alice.post("/api/v1/webhooks", json={"url": receiver.url}).get_json()
        queued = alice.post(f"/api/v1/webhooks/{hook['id']}/test")
        assert queued.status_code == 202
        [pending] = alice.get(f"/api/v1/webhooks/{hook['id']}/deliveries").get_json()["deliveries"]
        assert pending["id"] == queued.get_json()["delivery_id"]
        assert pending["status"] == "pending" and pending["attempts"] == 0
        WebhookSender(world.hooks, allow_hosts=["127.0.0.1"]).deliver_due()
        listed = alice.get(f"/api/v1/webhooks/{hook['id']}/deliveries?limit=5").get_json()
        [tried] = listed["deliveries"]
        assert tried["attempts"] == 1 and tried["last_status_code"] == 500
        assert tried["next_attempt_at"] and tried["history"][0]["status_code"] == 500
        assert_error(alice.get(f"/api/v1/webhooks/{hook['id']}/deliveries?limit=0"), 422)
        # deleting the webhook takes its deliveries with it: the retry is never sent
        assert alice.delete(f"/api/v1/webhooks/{hook['id']}").status_code == 200
        assert world.hooks.claim_due() == []
    finally:
        receiver.close()


def test_the_routes_are_documented(world: World) -> None:
    spec = world.client("anonymous").get("/api/v1/openapi.json").get_json()
    for path in (
        "/api/v1/webhooks",
        "/api/v1/webhooks/{webhook_id}",
        "/api/v1/webhooks/{webhook_id}/rotate-secret",
        "/api/v1/webhooks/{webhook_id}/deliveries",
        "/api/v1/webhooks/{webhook_id}/test",
    ):
        for method, operation in spec["paths"][path].items():
            if method == "parameters":
                continue
            assert {"401", "403"} <= set(operation["responses"]), (method, path)


def test_the_sdk_manages_webhooks_and_verifies_what_they_send(world: World) -> None:
    receiver = Receiver()
    server = make_server("127.0.0.1", 0, world.app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        world.app.config["DYNAEVAL_WEBHOOK_ALLOW_HOSTS"] = ["127.0.0.1"]
        client = DynaevalClient(f"http://127.0.0.1:{server.port}", api_key=world.tokens["alice"])
        made = client.create_webhook(receiver.url, model_id=world.ids["alice"], events=["done"])
        assert [h["id"] for h in client.webhooks()] == [made["id"]]
        secret = client.rotate_webhook_secret(made["id"])["secret"]
        client.test_webhook(made["id"])
        WebhookSender(world.hooks, allow_hosts=["127.0.0.1"]).deliver_due()
        [(headers, body)] = receiver.requests
        now = world.service.clock.now().replace(tzinfo=UTC).timestamp()
        assert verify_signature(secret, headers["dynaeval-signature"], body, now=now)
        assert not verify_signature(made["secret"], headers["dynaeval-signature"], body, now=now)
        assert client.webhook_deliveries(made["id"])[0]["status"] == "delivered"
        client.delete_webhook(made["id"])
        with pytest.raises(ApiClientError):
            client.delete_webhook(made["id"])
    finally:
        server.shutdown()
        receiver.close()
