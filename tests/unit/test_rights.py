"""The rights table (``api.rights``) walked with every scope and role, and the escalations
it closes: a read-only token that rotated an admin token into a new admin secret, and
read-only tokens that wrote views, snapshots, default views and tokens."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from api.app import create_app
from api.rights import AUTHENTICATED, PUBLIC, RIGHTS, Need
from api.rights import need as find_need
from configs.vocabulary.clock import ManualClock
from store.accounts import Accounts
from store.rules.principals import ADMIN, RESEARCHER, ROLE_SCOPES, SCOPES
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import AXES_A, assert_error, finished
from usecases.service import Service

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Writes that need no write scope: signing in and out changes no one's data.
SIGN_IN_OUT = frozenset(
    {
        ("POST", "/api/v1/session"),
        ("DELETE", "/api/v1/session"),
        ("POST", "/login"),
        ("POST", "/logout"),
    }
)
TOKEN_ROUTES = frozenset(k for k in RIGHTS if k[1].startswith("/api/v1/tokens"))


@dataclass
class Walk:
    app: Flask
    service: Service
    model_id: str
    other_id: str

    def client(self, token: str | None) -> FlaskClient:
        client = self.app.test_client()
        return client if token is None else signed_in(client, token)


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walk]:
    service = Service.open(tmp_path_factory.mktemp("rights") / "data", clock=ManualClock())
    issue_token(service, "root", ADMIN)
    issue_token(service, "rita", RESEARCHER)
    model_id = finished(service, "rita-model", AXES_A)
    other_id = finished(service, "root-model", AXES_A)
    accounts = Accounts(service.db)
    rita, root = accounts.user_by_name("rita"), accounts.user_by_name("root")
    assert rita is not None and root is not None
    accounts.set_model_owner(model_id, rita["id"])
    accounts.set_model_owner(other_id, root["id"])
    yield Walk(create_app(service), service, model_id, other_id)
    service.close()


def _credentials() -> list[tuple[str, str, tuple[str, ...]]]:
    """(label, role, scopes): every single scope each role may hold, and each role's all."""
    found = [("anonymous", "", ())]
    for role in (RESEARCHER, ADMIN):
        found += [(f"{role}:{s}", role, (s,)) for s in SCOPES if s in ROLE_SCOPES[role]]
        found.append((f"{role}:all", role, tuple(sorted(ROLE_SCOPES[role]))))
    return found


def _path(rule: str, walk: Walk) -> str:
    names = {
        "task_name": "sentiment",
        "round_name": "r1",
        "model_id": walk.model_id,
        "other_id": walk.other_id,
        "filename": "none.css",
        "number": "1",
    }
    return re.sub(r"<(?:[^<>]*:)?(\w+)>", lambda m: names.get(m.group(1), str(uuid.uuid4())), rule)


def _expected_refusal(need: Need, role: str, scopes: tuple[str, ...]) -> int | None:
    """401 or 403 when the table refuses this caller, None when it lets them through."""
    if need.scope == PUBLIC:
        return None
    if not role:
        return 401
    if need.role is not None and role != need.role:
        return 403
    if need.scope == AUTHENTICATED or need.scope in scopes:
        return None
    return 403


@pytest.mark.parametrize(("label", "role", "scopes"), _credentials(), ids=lambda v: str(v))
def test_every_route_answers_every_scope_and_role_as_the_table_says(
    walk: Walk, label: str, role: str, scopes: tuple[str, ...]
) -> None:
    token = (
        issue_token(walk.service, f"walk-{label.replace(':', '-')}", role, list(scopes))
        if role
        else None
    )
    client = walk.client(token)
    for (method, rule), need in sorted(RIGHTS.items()):
        path = _path(rule, walk)
        response = client.open(path, method=method, json={} if method in WRITES else None)
        refusal = _expected_refusal(need, role, scopes)
        where = f"{label} {method} {rule}: {response.status_code} {response.get_data(as_text=True)[:200]}"
        assert response.status_code < 500, where
        if refusal is not None:
            assert response.status_code == refusal, where
            if rule.startswith("/api/"):  # pages answer the same status as a page
                code = "unauthenticated" if refusal == 401 else "insufficient_scope"
                assert_error(response, refusal, code)
        elif response.status_code in (401, 403) and response.is_json:
            assert response.get_json()["error"]["code"] not in (
                "unauthenticated",
                "insufficient_scope",
            ), where


def test_every_write_needs_a_write_scope() -> None:
    """A read-only credential never writes: each write route needs submit, tokens or admin."""
    for (method, rule), need in RIGHTS.items():
        if method not in WRITES or (method, rule) in SIGN_IN_OUT:
            continue
        assert need.scope not in (PUBLIC, AUTHENTICATED, "read"), f"{method} {rule}"


def test_tokens_are_managed_with_a_scope_of_their_own() -> None:
    assert {RIGHTS[k].scope for k in TOKEN_ROUTES} == {"tokens"}


def test_the_openapi_document_states_each_operations_scope(walk: Walk) -> None:
    spec = walk.client(None).get("/api/v1/openapi.json").get_json()
    for path, operations in spec["paths"].items():
        rule = re.sub(r"\{(\w+)\}", r"<\1>", path)
        for method, operation in operations.items():
            if method == "parameters":  # shared by the path's operations
                continue
            need = find_need(method.upper(), rule)
            assert need is not None, (method, path)
            assert operation["x-required-scope"] == need.scope, (method, path)
            if need.scope not in (PUBLIC, AUTHENTICATED):
                assert "403" in operation["responses"], (method, path)


# -- the escalation found from outside, and its kind ------------------------------------------
@pytest.fixture
def admin_tokens(tmp_path: Path) -> Iterator[tuple[FlaskClient, Service, dict[str, str]]]:
    service = Service.open(tmp_path / "data", clock=ManualClock())
    accounts = Accounts(service.db)
    user = accounts.add_user("boss", ADMIN)
    made = {
        scopes: accounts.create_token(user["id"], scopes, scopes.split("+"))
        for scopes in ("read", "read+tokens", "read+submit+tokens+admin")
    }
    app = create_app(service)
    yield (
        app.test_client(),
        service,
        {k: v.secret for k, v in made.items()} | {f"id:{k}": v.info["id"] for k, v in made.items()},
    )
    service.close()


def test_a_read_only_token_cannot_rotate_an_admin_token(
    admin_tokens: tuple[FlaskClient, Service, dict[str, str]],
) -> None:
    client, _, made = admin_tokens
    signed_in(client, made["read"])
    assert_error(client.get("/api/v1/tokens"), 403, "insufficient_scope")
    admin_id = made["id:read+submit+tokens+admin"]
    assert_error(client.post(f"/api/v1/tokens/{admin_id}/rotate"), 403, "insufficient_scope")
    assert_error(client.delete(f"/api/v1/tokens/{admin_id}"), 403, "insufficient_scope")
    # the admin token still works, and nothing new was issued
    signed_in(client, made["read+submit+tokens+admin"])
    assert client.get("/api/v1/users").status_code == 200
    assert len(client.get("/api/v1/tokens").get_json()["tokens"]) == 3


def test_rotation_never_hands_out_more_than_the_caller_holds(
    admin_tokens: tuple[FlaskClient, Service, dict[str, str]],
) -> None:
    client, _, made = admin_tokens
    signed_in(client, made["read+tokens"])
    admin_id = made["id:read+submit+tokens+admin"]
    assert_error(client.post(f"/api/v1/tokens/{admin_id}/rotate"), 403, "scope_not_allowed")
    signed_in(client, made["read+submit+tokens+admin"])
    states = {t["id"]: t["state"] for t in client.get("/api/v1/tokens").get_json()["tokens"]}
    assert states[admin_id] == "active"  # refused means untouched
    # rotating a token within the caller's scopes still works
    signed_in(client, made["read+tokens"])
    rotated = client.post(f"/api/v1/tokens/{made['id:read']}/rotate")
    assert rotated.status_code == 201 and rotated.get_json()["scopes"] == ["read"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/api/v1/tasks/sentiment/views", {"name": "v"}),
        ("DELETE", "/api/v1/views/{view}", None),
        ("POST", "/api/v1/tasks/sentiment/snapshots", {}),
        ("PUT", "/api/v1/tasks/sentiment/default-view", {"view": None}),
        ("POST", "/api/v1/tokens", {"name": "t", "scopes": ["read"]}),
        ("DELETE", "/api/v1/tokens/{token}", None),
        ("POST", "/api/v1/tokens/{token}/rotate", None),
        ("POST", "/tasks/sentiment/views", {}),
        ("POST", "/tasks/sentiment/snapshots", {}),
    ],
)
def test_the_read_scope_does_not_write(
    admin_tokens: tuple[FlaskClient, Service, dict[str, str]],
    method: str,
    path: str,
    body: dict[str, object] | None,
) -> None:
    client, _, made = admin_tokens
    signed_in(client, made["read+submit+tokens+admin"])
    view = client.post("/api/v1/tasks/sentiment/views", json={"name": "kept"}).get_json()["id"]
    signed_in(client, made["read"])
    target = path.format(view=view, token=made["id:read"])
    response = client.open(target, method=method, json=body)
    if target.startswith("/api/"):
        assert_error(response, 403, "insufficient_scope")
    else:  # a page's form answers with a page
        assert response.status_code == 403
    assert client.get(f"/api/v1/views/{view}").status_code == 200


def test_a_weaker_token_cannot_revoke_a_stronger_one(
    admin_tokens: tuple[FlaskClient, Service, dict[str, str]],
) -> None:
    """A read+tokens token revoked its owner's admin token (found from outside): no lock-out
    by a weaker credential; revoking one within its scopes still works."""
    client, _, made = admin_tokens
    signed_in(client, made["read+tokens"])
    admin_id = made["id:read+submit+tokens+admin"]
    assert_error(client.delete(f"/api/v1/tokens/{admin_id}"), 403, "scope_not_allowed")
    assert client.delete(f"/api/v1/tokens/{made['id:read']}").get_json()["state"] == "revoked"
    signed_in(client, made["read+submit+tokens+admin"])
    assert client.get("/api/v1/users").status_code == 200
