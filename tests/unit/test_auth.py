"""Accounts and authorization through the real app: every role against every route, guessed
ids, tokens (rotation, revocation, expiry on a manual clock), the page login's cookie and
cross-site checks, and the Host allow-list."""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from api.app import create_app
from api.auth import host_allowed
from api.rights import RIGHTS
from configs.paths import CONFIG_DIR
from configs.vocabulary.clock import ManualClock
from store.accounts import AccountError, Accounts, csrf_token
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import AXES_A, DOCKER, PROCESS, assert_error, finished
from usecases.service import Service
from usecases.uploads import start_upload

ROLES = ("anonymous", "alice", "bob", "carol", "admin", "alice_read", "alice_submit")


@dataclasses.dataclass
class World:
    """Users, tokens and submissions: alice and bob are researchers, carol owns ``nli`` and
    the private ``qa``; ``legacy`` has no owner (a row from before accounts)."""

    app: Flask
    service: Service
    clock: ManualClock
    tokens: dict[str, str]
    ids: dict[str, str]

    def client(self, role: str) -> FlaskClient:
        client = self.app.test_client()
        return client if role == "anonymous" else signed_in(client, self.tokens[role])

    @property
    def accounts(self) -> Accounts:
        return Accounts(self.service.db, self.clock)


def _owned(service: Service, owner: str | None, task: str, name: str) -> str:
    model_id = finished(service, name, AXES_A, task=task)
    user = Accounts(service.db).user_by_name(owner) if owner else None
    Accounts(service.db).set_model_owner(model_id, user["id"] if user else None)
    return model_id


def _world(folder: Path) -> Iterator[World]:
    clock = ManualClock()
    service = Service.open(folder / "data", clock=clock)
    tokens = {
        "admin": issue_token(service, "admin", "admin"),
        "alice": issue_token(service, "alice", "researcher"),
        "bob": issue_token(service, "bob", "researcher"),
        "carol": issue_token(service, "carol", "researcher"),
        "alice_read": issue_token(service, "alice", scopes=["read"]),
        "alice_submit": issue_token(service, "alice", scopes=["submit"]),
    }
    accounts = Accounts(service.db, clock)
    accounts.set_task_access("nli", "carol", private=False)
    accounts.set_task_access("qa", "carol", private=True)
    ids = {
        "alice": _owned(service, "alice", "sentiment", "alice-model"),
        "bob": _owned(service, "bob", "sentiment", "bob-model"),
        "bob_nli": _owned(service, "bob", "nli", "bob-nli"),
        "carol_qa": _owned(service, "carol", "qa", "carol-qa"),
        "legacy": _owned(service, None, "sentiment", "legacy"),
        "guessed": str(uuid.uuid4()),
    }
    alice = accounts.authenticate(tokens["alice"])
    ids["alice_upload"] = start_upload(
        service, service.tasks["sentiment"], alice, 1000, "m.tar"
    ).record.id
    yield World(create_app(service), service, clock, tokens, ids)
    service.close()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from _world(tmp_path)


@pytest.fixture(scope="module")
def shared_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One world for the cases that must leave it as they found it: reads, and refusals
    (a refused request stores nothing, so the next case sees the same world)."""
    yield from _world(tmp_path_factory.mktemp("shared-world"))


# -- every role against every route ----------------------------------------------------------
# (method, path template, body) -> {role: status}; roles left out answer ``default``.
OK_ALL = dict.fromkeys(ROLES, 200)
SEES_ALICE = {"anonymous": 401, "alice": 200, "alice_read": 200, "admin": 200, "alice_submit": 403}
SEES_BOB_NLI = {"anonymous": 401, "bob": 200, "carol": 200, "admin": 200, "alice_submit": 403}
ONLY_ADMIN = {"anonymous": 401, "admin": 200}
PRIVATE_TASK = {"carol": 200, "admin": 200}
READS_ALICE = {"alice": 200, "alice_read": 200, "admin": 200}
READS_BOB_NLI = {"bob": 200, "carol": 200, "admin": 200}
# A public registry (the local-network ones are refused before authorization matters).
SUBMIT = {"name": "m", "runtime": {**DOCKER, "image": "ghcr.io/team/model:1"}}
TABLE: list[tuple[str, str, Any, dict[str, int], int]] = [
    ("GET", "/api/v1/health", None, OK_ALL, 200),
    ("GET", "/api/v1/ready", None, OK_ALL, 200),
    ("GET", "/api/v1/tasks", None, OK_ALL, 200),
    ("GET", "/api/v1/openapi.json", None, OK_ALL, 200),
    ("GET", "/api/v1/tasks/sentiment", None, OK_ALL, 200),
    ("GET", "/api/v1/tasks/sentiment/leaderboard", None, OK_ALL, 200),
    ("GET", "/api/v1/tasks/qa", None, PRIVATE_TASK, 404),
    ("GET", "/api/v1/tasks/qa/leaderboard", None, PRIVATE_TASK, 404),
    # public routes (a published model is everyone's): unpublished ones are 404 to others
    ("GET", "/api/v1/submissions/{alice}", None, READS_ALICE, 404),
    ("GET", "/api/v1/submissions/{alice}/scores", None, READS_ALICE, 404),
    ("GET", "/api/v1/submissions/{bob_nli}", None, READS_BOB_NLI, 404),
    ("GET", "/api/v1/submissions/{bob_nli}/scores", None, READS_BOB_NLI, 404),
    ("GET", "/api/v1/submissions/{carol_qa}", None, PRIVATE_TASK, 404),
    ("GET", "/api/v1/submissions/{legacy}", None, {"admin": 200}, 404),
    ("GET", "/api/v1/submissions/{guessed}", None, {}, 404),
    ("GET", "/api/v1/submissions/{guessed}/scores", None, {}, 404),
    ("PUT", "/api/v1/submissions/{alice}/publication", {"published": True}, {"anonymous": 401, "alice_read": 403, "alice": 200, "admin": 200}, 404),
    ("PUT", "/api/v1/submissions/{bob_nli}/publication", {"published": True}, {"anonymous": 401, "alice_read": 403, "bob": 200, "carol": 403, "admin": 200}, 404),
    ("PUT", "/api/v1/submissions/{legacy}/publication", {"published": True}, {"anonymous": 401, "alice_read": 403, "admin": 200}, 404),
    ("PUT", "/api/v1/submissions/{guessed}/publication", {"published": True}, {"anonymous": 401, "alice_read": 403}, 404),
    ("GET", "/api/v1/submissions", None, {"anonymous": 401, "alice_submit": 403}, 200),
    ("GET", "/api/v1/tasks/sentiment/submissions", None, {"anonymous": 401, "alice_submit": 403}, 200),
    ("GET", "/api/v1/tasks/qa/submissions", None, {"anonymous": 401, "alice_submit": 403, **PRIVATE_TASK}, 404),
    ("POST", "/api/v1/tasks/sentiment/submissions", SUBMIT, {"anonymous": 401, "alice_read": 403}, 201),
    ("GET", "/api/v1/tasks/sentiment/quota", None, {"anonymous": 401, "alice_submit": 403}, 200),
    ("GET", "/api/v1/tasks/qa/quota", None, {"anonymous": 401, "alice_submit": 403, **PRIVATE_TASK}, 404),
    ("POST", "/api/v1/tasks/qa/submissions", SUBMIT, {"anonymous": 401, "alice_read": 403, "carol": 201, "admin": 201}, 404),
    ("GET", "/api/v1/users", None, {**ONLY_ADMIN}, 403),
    ("POST", "/api/v1/users", {"name": "dave"}, {"anonymous": 401, "admin": 201}, 403),
    ("PUT", "/api/v1/tasks/hate_speech/access", {"owner": "bob"}, ONLY_ADMIN, 403),
    ("POST", "/api/v1/submissions/{bob_nli}/rerun", None, {"anonymous": 401, "alice_read": 403, "bob": 201, "carol": 201, "admin": 201}, 404),
    ("POST", "/api/v1/submissions/{legacy}/rerun", None, {"anonymous": 401, "alice_read": 403, "admin": 201}, 404),
    ("POST", "/api/v1/submissions/{alice}/cancel", None, {"anonymous": 401, "alice_read": 403, "alice": 409, "admin": 409}, 404),
    ("POST", "/api/v1/submissions/{bob_nli}/cancel", None, {"anonymous": 401, "alice_read": 403, "bob": 409, "carol": 409, "admin": 409}, 404),
    ("GET", "/api/v1/submissions/{alice}/results/download", None, SEES_ALICE, 404),
    ("GET", "/api/v1/submissions/{carol_qa}/results/download", None, {**PRIVATE_TASK, "anonymous": 401, "alice_submit": 403}, 404),
    ("GET", "/api/v1/me", None, {"anonymous": 401}, 200),
    ("GET", "/api/v1/tokens", None, {"anonymous": 401, "alice_read": 403, "alice_submit": 403}, 200),
    ("POST", "/api/v1/tokens", {"name": "t", "scopes": ["read"]}, {"anonymous": 401, "alice_read": 403, "alice_submit": 403}, 201),
    ("GET", "/api/v1/tasks/sentiment/views", None, OK_ALL, 200),
    ("GET", "/api/v1/tasks/qa/views", None, PRIVATE_TASK, 404),
    ("POST", "/api/v1/tasks/sentiment/views", {"name": "v"}, {"anonymous": 401, "alice_read": 403}, 201),
    ("POST", "/api/v1/tasks/qa/views", {"name": "v"}, {"anonymous": 401, "alice_read": 403, "carol": 201, "admin": 201}, 404),
    ("GET", "/api/v1/views/{guessed}", None, {}, 404),
    ("DELETE", "/api/v1/views/{guessed}", None, {"anonymous": 401, "alice_read": 403}, 404),
    ("PUT", "/api/v1/tasks/sentiment/default-view", {"view": None}, {"anonymous": 401, "admin": 200}, 403),
    ("PUT", "/api/v1/tasks/qa/default-view", {"view": None}, {"anonymous": 401, "alice_read": 403, **PRIVATE_TASK}, 404),
    ("POST", "/api/v1/tasks/sentiment/snapshots", {}, {"anonymous": 401, "alice_read": 403}, 201),
    ("POST", "/api/v1/tasks/qa/snapshots", {}, {"anonymous": 401, "alice_read": 403, "carol": 201, "admin": 201}, 404),
    ("GET", "/api/v1/snapshots/{guessed}", None, {}, 404),
    ("GET", "/api/v1/webhooks", None, {"anonymous": 401, "alice_read": 403}, 200),
    ("GET", "/api/v1/webhooks?all=true", None, {"anonymous": 401, "alice_read": 403, "admin": 200}, 403),
    ("POST", "/api/v1/webhooks", {"url": "https://hooks.example.com/ci"}, {"anonymous": 401, "alice_read": 403}, 201),
    ("GET", "/api/v1/webhooks/{guessed}", None, {"anonymous": 401, "alice_read": 403}, 404),
    ("DELETE", "/api/v1/webhooks/{guessed}", None, {"anonymous": 401, "alice_read": 403}, 404),
    ("POST", "/api/v1/webhooks/{guessed}/rotate-secret", None, {"anonymous": 401, "alice_read": 403}, 404),
    ("GET", "/api/v1/webhooks/{guessed}/deliveries", None, {"anonymous": 401, "alice_read": 403}, 404),
    ("POST", "/api/v1/webhooks/{guessed}/test", None, {"anonymous": 401, "alice_read": 403}, 404),
    ("GET", "/api/v1/tasks/sentiment/rounds", None, OK_ALL, 200),
    ("GET", "/api/v1/tasks/qa/rounds", None, PRIVATE_TASK, 404),
    ("POST", "/api/v1/tasks/sentiment/rounds", {"name": "r9"}, {"anonymous": 401, "admin": 422}, 403),
    ("POST", "/api/v1/tasks/qa/rounds", {"name": "r9"}, {"anonymous": 401, "alice_read": 403, "carol": 422, "admin": 422}, 404),
    ("POST", "/api/v1/tasks/sentiment/rounds/r1/datasets", {}, {"anonymous": 401, "admin": 422}, 403),
    ("POST", "/api/v1/tasks/qa/rounds/r1/datasets", {}, {"anonymous": 401, "alice_read": 403, "carol": 422, "admin": 422}, 404),
    ("PATCH", "/api/v1/tasks/sentiment/rounds/r1", {"weight": 1}, {"anonymous": 401, "admin": 200}, 403),
    ("PATCH", "/api/v1/tasks/qa/rounds/r1", {"weight": 1}, {"anonymous": 401, "alice_read": 403, "carol": 200, "admin": 200}, 404),
    ("GET", "/api/v1/tasks/sentiment/rounds/r1/validation", None, {"anonymous": 401, "alice_submit": 403}, 404),
    ("GET", "/api/v1/tasks/qa/rounds/r1/validation", None, {"anonymous": 401, "alice_submit": 403}, 404),
    ("GET", "/api/v1/tasks/sentiment/rounds/r1/vmer", None, {}, 404),
    ("GET", "/api/v1/tasks/qa/rounds/r1/vmer", None, {}, 404),
    ("POST", "/api/v1/examples/{guessed}/votes", {"verdict": "correct"}, {"anonymous": 401, "alice_read": 403}, 404),
    ("GET", "/api/v1/examples/{guessed}/votes", None, {"anonymous": 401, "alice_submit": 403}, 404),
    ("POST", "/api/v1/examples/{guessed}/settle", {"verdict": "correct"}, {"anonymous": 401, "alice_read": 403}, 404),
    ("POST", "/api/v1/tasks/sentiment/rounds/r1/freeze", None, {"anonymous": 401, "admin": 404}, 403),
    ("POST", "/api/v1/tasks/qa/rounds/r1/freeze", None, {"anonymous": 401, "alice_read": 403}, 404),
    ("POST", "/api/v1/tasks/nli/rounds/r9/collection", {"model_ids": ["nope"]}, {"anonymous": 401, "carol": 422, "admin": 422}, 403),
    ("POST", "/api/v1/tasks/qa/rounds/r9/collection", {"model_ids": ["nope"]}, {"anonymous": 401, "alice_read": 403, "carol": 422, "admin": 422}, 404),
    ("GET", "/api/v1/tasks/nli/rounds/r9/collection", None, {}, 404),
    ("GET", "/api/v1/tasks/qa/rounds/r9/collection", None, {}, 404),
    ("POST", "/api/v1/tasks/nli/rounds/r9/collection/close", None, {"anonymous": 401, "carol": 404, "admin": 404}, 403),
    ("POST", "/api/v1/tasks/qa/rounds/r9/collection/close", None, {"anonymous": 401, "alice_read": 403}, 404),
    ("POST", "/api/v1/tasks/nli/rounds/r9/examples", {"inputs": {}}, {"anonymous": 401, "alice_read": 403}, 404),
    ("POST", "/api/v1/tasks/qa/rounds/r9/examples", {"inputs": {}}, {"anonymous": 401, "alice_read": 403}, 404),
    ("GET", "/api/v1/tasks/nli/rounds/r9/examples", None, {}, 404),
    ("GET", "/api/v1/tasks/qa/rounds/r9/examples", None, {}, 404),
    ("GET", "/api/v1/tasks/nli/rounds/r9/examples/export", None, {"anonymous": 401, "carol": 404, "admin": 404}, 403),
    ("GET", "/api/v1/tasks/qa/rounds/r9/examples/export", None, {"anonymous": 401, "alice_submit": 403}, 404),
    ("POST", "/api/v1/tasks/sentiment/rounds/r1/adversary", {}, {"anonymous": 401, "admin": 404}, 403),
    ("POST", "/api/v1/tasks/qa/rounds/r1/adversary", {}, {"anonymous": 401, "alice_read": 403}, 404),
    ("GET", "/api/v1/tasks/sentiment/rounds/r1/adversary", None, OK_ALL, 200),
    ("GET", "/api/v1/tasks/qa/rounds/r1/adversary", None, PRIVATE_TASK, 404),
    ("GET", "/metrics", None, ONLY_ADMIN, 403),  # api.metrics: an operator's route
    # resumable uploads: only their submitter's (an admin is no exception: 404)
    ("POST", "/api/v1/tasks/sentiment/uploads", {"size": 1000}, {"anonymous": 401, "alice_read": 403}, 201),
    ("POST", "/api/v1/tasks/qa/uploads", {"size": 1000}, {"anonymous": 401, "alice_read": 403, "carol": 201, "admin": 201}, 404),
    ("GET", "/api/v1/uploads", None, {"anonymous": 401, "alice_submit": 403}, 200),
    ("GET", "/api/v1/uploads/{alice_upload}", None, {"anonymous": 401, "alice_submit": 403, "alice": 200, "alice_read": 200}, 404),
    ("GET", "/api/v1/uploads/{guessed}", None, {"anonymous": 401, "alice_submit": 403}, 404),
    ("PUT", "/api/v1/uploads/{alice_upload}/parts/1", None, {"anonymous": 401, "alice_read": 403, "alice": 422, "alice_submit": 422}, 404),
    ("DELETE", "/api/v1/uploads/{alice_upload}", None, {"anonymous": 401, "alice_read": 403, "alice": 200, "alice_submit": 200}, 404),
]  # fmt: skip


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(
    ("method", "path", "body", "expected", "default"), TABLE, ids=[f"{m} {p}" for m, p, *_ in TABLE]
)
def test_every_role_against_every_route(
    request: pytest.FixtureRequest,
    role: str,
    method: str,
    path: str,
    body: Any,
    expected: dict[str, int],
    default: int,
) -> None:
    status = expected.get(role, default)
    leaves_it_alone = method in ("GET", "HEAD") or status >= 400
    world: World = request.getfixturevalue("shared_world" if leaves_it_alone else "world")
    response = world.client(role).open(path.format(**world.ids), method=method, json=body)
    world.clock.advance(61)  # the next case starts with full rate-limit buckets
    assert response.status_code == status, response.get_data(as_text=True)
    if status >= 400:
        assert_error(response, status)


def test_the_table_covers_every_route(world: World) -> None:
    covered = {(m, _template(p)) for m, p, *_ in TABLE}
    for rule in world.app.url_map.iter_rules():
        if (
            not rule.endpoint.startswith(
                (
                    "v1.",
                    "accounts.",
                    "views.",
                    "webhooks.",
                    "rounds.",
                    "validation.",
                    "collection.",
                    "freezing.",
                    "adversary.",
                    "uploads.",
                )
            )
            or "compare" in rule.rule
        ):
            continue  # pages, downloads and the comparison: the tests below
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            if rule.rule.startswith(("/api/v1/tokens/", "/api/v1/session")):
                continue  # tokens/<id> and the login have their own tests below
            assert (method, _template(rule.rule)) in covered, f"add {method} {rule.rule} to TABLE"


def _template(path: str) -> str:
    """``/api/v1/submissions/<model_id>`` and ``.../{alice}`` both as ``.../*``."""
    parts = path.split("/")
    return "/".join(
        "*"
        if p.startswith(("<", "{"))
        or p.isdigit()
        or p in ("qa", "sentiment", "hate_speech", "nli", "r1", "r9")
        else p
        for p in parts
    )


def test_the_rights_table_names_every_route_and_nothing_else(world: World) -> None:
    served = {
        (method, rule.rule)
        for rule in world.app.url_map.iter_rules()
        for method in rule.methods - {"HEAD", "OPTIONS"}
    }
    assert served - set(RIGHTS) == set(), "add these routes to api.rights"
    assert set(RIGHTS) - served == set(), "these rights name no route"


def test_any_route_under_a_submission_id_is_404_to_others(world: World) -> None:
    """Scores, log tails, predictions, comparisons: whatever hangs under a submission id."""
    for rule in world.app.url_map.iter_rules():
        if "<model_id>" not in rule.rule or "GET" not in rule.methods:
            continue
        path = rule.rule.replace("<model_id>", world.ids["alice"])
        path = path.replace("<other_id>", world.ids["bob"])
        for role in ("anonymous", "bob", "carol"):
            assert world.client(role).get(path).status_code in (401, 404), (role, path)
        if "<other_id>" in rule.rule:  # alice may not see bob's either
            assert world.client("alice").get(path).status_code == 404, path
        else:
            assert world.client("alice").get(path).status_code != 404, path


def test_lists_show_only_what_the_caller_may_see(world: World) -> None:
    def names(role: str, path: str = "/api/v1/submissions") -> set[str]:
        response = world.client(role).get(path)
        assert response.status_code == 200, response.get_json()
        return {s["name"] for s in response.get_json()["submissions"]}

    everything = {"alice-model", "bob-model", "bob-nli", "carol-qa", "legacy"}
    assert names("admin") == everything
    assert names("alice") == {"alice-model"}
    assert names("bob") == {"bob-model", "bob-nli"}
    assert names("carol") == {"bob-nli", "carol-qa"}  # her tasks' submissions, her own
    assert names("alice", "/api/v1/tasks/sentiment/submissions") == {"alice-model"}
    assert names("carol", "/api/v1/tasks/nli/submissions") == {"bob-nli"}
    tasks = {t["name"] for t in world.client("alice").get("/api/v1/tasks").get_json()["tasks"]}
    assert "qa" not in tasks and "sentiment" in tasks
    tasks = {t["name"] for t in world.client("carol").get("/api/v1/tasks").get_json()["tasks"]}
    assert "qa" in tasks
    error = assert_error(world.client("alice").get("/api/v1/tasks/nope"), 404, "unknown_task")
    # a private task's name is not leaked either ("vqa" may be listed: it is public)
    assert not re.search(r"\bqa\b", error["message"])


def test_a_private_task_is_404_to_outsiders_and_its_board_is_its_owners(
    shared_world: World,
) -> None:
    """A task's visibility is read for the task a request names (its owner and privacy,
    not every task's stored spec), with the same answer for each caller."""
    board = "/api/v1/tasks/qa/leaderboard"
    for role in ("alice", "bob", "alice_read"):
        error = assert_error(shared_world.client(role).get(board), 404, "unknown_task")
        assert not re.search(r"\bqa\b", error["message"].split("(tasks:")[1])
    for role in ("carol", "admin"):
        assert shared_world.client(role).get(board).status_code == 200
    access = Accounts(shared_world.service.db).task_access("qa")
    assert set(access) == {"qa"} and access["qa"].private
    assert set(Accounts(shared_world.service.db).task_access()) >= {"qa", "nli", "sentiment"}


def test_a_submission_belongs_to_its_submitter(world: World) -> None:
    created = world.client("bob").post("/api/v1/tasks/sentiment/submissions", json=SUBMIT)
    assert created.status_code == 201
    model_id = created.get_json()["id"]
    assert world.client("bob").get(f"/api/v1/submissions/{model_id}").status_code == 200
    assert_error(world.client("alice").get(f"/api/v1/submissions/{model_id}"), 404)


def test_no_route_serves_held_out_text(world: World) -> None:
    """Held-out inputs and labels stay on the server: no GET answer quotes them."""
    held_out = [
        json.loads(line)["statement"]
        for line in (CONFIG_DIR / "datasets" / "sentiment" / "r1.jsonl")
        .read_text()
        .splitlines()[:20]
    ]
    admin = world.client("admin")
    for rule in world.app.url_map.iter_rules():
        if "GET" not in rule.methods:
            continue
        path = rule.rule.replace("<task_name>", "sentiment").replace(
            "<model_id>", world.ids["alice"]
        )
        path = path.replace("<other_id>", world.ids["bob"])
        body = admin.get(path).get_data(as_text=True)
        assert not any(text in body for text in held_out), path
    assert not any(
        word in rule.rule
        for rule in world.app.url_map.iter_rules()
        if "GET" in rule.methods  # adding a round's dataset is a write that answers metadata
        for word in ("dataset", "label", "blob")
    )


# -- local runtimes --------------------------------------------------------------------------
def test_local_runtimes_are_for_admins_only_even_when_allowed(tmp_path: Path) -> None:
    service = Service.open(tmp_path / "data", allow_local_runtimes=True)
    try:
        app = create_app(service)
        body = {"name": "m", "runtime": PROCESS}
        researcher = signed_in(app.test_client(), issue_token(service, "r", "researcher"))
        response = researcher.post("/api/v1/tasks/sentiment/submissions", json=body)
        assert_error(response, 403, "runtime_not_allowed")
        admin = signed_in(app.test_client(), issue_token(service))
        assert admin.post("/api/v1/tasks/sentiment/submissions", json=body).status_code == 201
    finally:
        service.close()


# -- tokens ----------------------------------------------------------------------------------
def _create(client: FlaskClient, **body: Any) -> dict[str, Any]:
    response = client.post("/api/v1/tokens", json={"name": "ci", **body})
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def test_tokens_are_created_listed_and_shown_once(world: World) -> None:
    alice = world.client("alice")
    made = _create(alice, scopes=["read"])
    assert made["token"].startswith(made["prefix"]) and made["scopes"] == ["read"]
    listed = alice.get("/api/v1/tokens").get_json()["tokens"]
    mine = [t for t in listed if t["id"] == made["id"]]
    assert mine and "token" not in mine[0] and mine[0]["state"] == "active"
    assert made["token"] not in json.dumps(listed)
    # Only the hash is stored.
    with world.service.db.engine.connect() as connection:
        dump = "\n".join(str(row) for row in connection.exec_driver_sql("SELECT * FROM api_tokens"))
    assert made["token"] not in dump
    # bob sees none of alice's tokens
    bob_tokens = world.client("bob").get("/api/v1/tokens").get_json()["tokens"]
    assert made["id"] not in {t["id"] for t in bob_tokens}
    reader = signed_in(world.app.test_client(), made["token"])
    assert reader.get(f"/api/v1/submissions/{world.ids['alice']}").status_code == 200
    assert_error(
        reader.post("/api/v1/tasks/sentiment/submissions", json=SUBMIT), 403, "insufficient_scope"
    )


def test_tokens_grant_no_more_than_their_maker(world: World) -> None:
    assert_error(
        world.client("alice").post("/api/v1/tokens", json={"name": "x", "scopes": ["admin"]}),
        403,
        "scope_not_allowed",
    )
    assert_error(
        world.client("alice_read").post("/api/v1/tokens", json={"name": "x", "scopes": ["read"]}),
        403,
        "insufficient_scope",  # managing tokens is a scope of its own
    )
    manager = _create(world.client("alice"), scopes=["read", "tokens"])["token"]
    assert_error(
        signed_in(world.app.test_client(), manager).post(
            "/api/v1/tokens", json={"name": "x", "scopes": ["submit"]}
        ),
        403,
        "scope_not_allowed",
    )
    assert_error(
        world.client("alice").post("/api/v1/tokens", json={"name": "x", "scopes": ["root"]}), 422
    )
    assert_error(
        world.client("alice").post("/api/v1/tokens", json={"name": "x", "expires_in_days": -1}), 422
    )


def test_a_revoked_token_is_401_token_revoked(world: World) -> None:
    alice = world.client("alice")
    made = _create(alice)
    assert alice.delete(f"/api/v1/tokens/{made['id']}").get_json()["state"] == "revoked"
    response = signed_in(world.app.test_client(), made["token"]).get("/api/v1/me")
    error = assert_error(response, 401, "token_revoked")
    assert "revoked" in error["message"]
    assert_error(world.client("bob").delete(f"/api/v1/tokens/{made['id']}"), 404, "unknown_token")


def test_rotation_replaces_the_secret(world: World) -> None:
    alice = world.client("alice")
    made = _create(alice, scopes=["read", "submit"], expires_in_days=30)
    assert_error(
        world.client("bob").post(f"/api/v1/tokens/{made['id']}/rotate"), 404, "unknown_token"
    )
    world.clock.advance(3600)
    rotated = alice.post(f"/api/v1/tokens/{made['id']}/rotate")
    assert rotated.status_code == 201
    new = rotated.get_json()
    assert new["token"] != made["token"] and new["scopes"] == ["read", "submit"]
    assert new["expires_at"] > made["expires_at"]  # the same 30 days, from now
    assert_error(
        signed_in(world.app.test_client(), made["token"]).get("/api/v1/me"), 401, "token_revoked"
    )
    assert signed_in(world.app.test_client(), new["token"]).get("/api/v1/me").status_code == 200
    assert_error(alice.post(f"/api/v1/tokens/{made['id']}/rotate"), 422, "token_revoked")


def test_an_expired_token_is_401_token_expired(world: World) -> None:
    made = _create(world.client("alice"), expires_in_days=1)
    client = signed_in(world.app.test_client(), made["token"])
    assert client.get("/api/v1/me").status_code == 200
    world.clock.advance(86_400)
    error = assert_error(client.get("/api/v1/me"), 401, "token_expired")
    assert "expired" in error["message"]
    listed = world.client("alice").get("/api/v1/tokens").get_json()["tokens"]
    assert {t["id"]: t["state"] for t in listed}[made["id"]] == "expired"


@pytest.mark.parametrize("header", ["Bearer dyn_nope", "Bearer ", "Basic YWxpY2U6eA==", "token"])
def test_unknown_credentials_are_401_unauthenticated(world: World, header: str) -> None:
    response = world.app.test_client().get("/api/v1/tasks", headers={"Authorization": header})
    assert_error(response, 401, "unauthenticated")


# -- the page login --------------------------------------------------------------------------
@pytest.fixture
def session(world: World) -> tuple[FlaskClient, str]:
    world.accounts.add_user("erin", "researcher", "correct horse battery")
    client = world.app.test_client()
    response = client.post(
        "/api/v1/session", json={"name": "erin", "password": "correct horse battery"}
    )
    assert response.status_code == 200, response.get_json()
    return client, response.get_json()["csrf_token"]


def test_login_sets_a_strict_cookie(world: World) -> None:
    world.accounts.add_user("erin", "researcher", "correct horse battery")
    response = world.app.test_client().post(
        "/api/v1/session", json={"name": "erin", "password": "correct horse battery"}
    )
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Secure" not in cookie  # plain http on loopback
    stored = Accounts(world.service.db).users()
    assert all("correct horse" not in json.dumps(u) for u in stored)
    with world.service.db.engine.connect() as connection:
        [hashed] = connection.exec_driver_sql(
            "SELECT password_hash FROM users WHERE name='erin'"
        ).one()
    assert hashed.startswith("$argon2")


def test_a_cookie_off_loopback_is_secure(tmp_path: Path) -> None:
    service = Service.open(tmp_path / "data")
    try:
        app = create_app(service, allowed_hosts=["eval.example.org"])
        Accounts(service.db).add_user("erin", "researcher", "correct horse battery")
        client = app.test_client()
        response = client.post(
            "/api/v1/session",
            json={"name": "erin", "password": "correct horse battery"},
            base_url="https://eval.example.org",
        )
        assert "Secure" in response.headers["Set-Cookie"]
    finally:
        service.close()


@pytest.mark.parametrize("password", ["wrong password", ""])
def test_a_wrong_password_is_401(world: World, password: str) -> None:
    world.accounts.add_user("erin", "researcher", "correct horse battery")
    response = world.app.test_client().post(
        "/api/v1/session", json={"name": "erin", "password": password}
    )
    assert response.status_code in (401, 422)
    response = world.app.test_client().post(
        "/api/v1/session", json={"name": "nobody", "password": "x" * 9}
    )
    assert_error(response, 401, "invalid_credentials")


def test_session_reads_need_no_csrf_token(world: World, session: tuple[FlaskClient, str]) -> None:
    client, _ = session
    assert client.get("/api/v1/me").get_json()["via"] == "session"
    assert client.get("/api/v1/submissions").status_code == 200


def test_cross_site_writes_with_a_session_are_refused(
    world: World, session: tuple[FlaskClient, str]
) -> None:
    client, csrf = session
    url = "/api/v1/tasks/sentiment/submissions"
    evil = {"Origin": "http://evil.example"}
    assert_error(client.post(url, json=SUBMIT, headers=evil), 403, "cross_site_refused")
    assert_error(client.post(url, json=SUBMIT), 403, "cross_site_refused")  # no Origin, no token
    assert_error(client.post(url, json=SUBMIT, headers={"X-CSRF-Token": "0" * 64}), 403)
    assert client.post(url, json=SUBMIT, headers={"Origin": "http://localhost"}).status_code == 201
    assert client.post(url, json=SUBMIT, headers={"X-CSRF-Token": csrf}).status_code == 201
    assert csrf == csrf_token(client.get_cookie("dynaeval_session").value)


def test_a_cross_site_login_is_refused(world: World) -> None:
    world.accounts.add_user("erin", "researcher", "correct horse battery")
    response = world.app.test_client().post(
        "/api/v1/session",
        json={"name": "erin", "password": "correct horse battery"},
        headers={"Origin": "https://evil.example"},
    )
    assert_error(response, 403, "cross_site_refused")


def test_bearer_writes_need_no_origin(world: World) -> None:
    response = world.client("alice").post(
        "/api/v1/tasks/sentiment/submissions",
        json=SUBMIT,
        headers={"Origin": "http://evil.example"},
    )
    assert response.status_code == 201


def test_logout_ends_the_session(world: World, session: tuple[FlaskClient, str]) -> None:
    client, csrf = session
    cookie = client.get_cookie("dynaeval_session").value
    assert client.delete("/api/v1/session", headers={"X-CSRF-Token": csrf}).status_code == 200
    fresh = world.app.test_client()
    fresh.set_cookie("dynaeval_session", cookie)
    assert_error(fresh.get("/api/v1/me"), 401, "unauthenticated")


# -- Host allow-list -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8000", "127.0.0.2", "localhost.evil"]
)
def test_a_foreign_host_is_refused(world: World, host: str) -> None:
    response = world.client("admin").get("/api/v1/tasks", headers={"Host": host})
    assert_error(response, 421, "host_not_allowed")


@pytest.mark.parametrize("path", ["/api/v1/health", "/api/v1/ready"])
def test_the_probes_answer_any_host_and_any_credentials(world: World, path: str) -> None:
    """A load balancer addresses a node by its IP, and a probe holding a stale token must
    not take the node out of service; the rest of the API still refuses both."""
    anyone = world.app.test_client()
    for headers in (
        {"Host": "10.1.2.3:8000"},
        {"Authorization": "Bearer not-a-token"},
        {"Authorization": "Basic dXNlcjpwdw=="},
        {"Host": "evil.example", "Authorization": "Bearer x"},
    ):
        reply = anyone.get(path, headers=headers)
        assert reply.status_code == 200, (headers, reply.get_json())
        assert "task" not in reply.get_data(as_text=True)
    assert_error(anyone.get("/api/v1/tasks", headers={"Host": "10.1.2.3:8000"}), 421)
    bad_token = {"Authorization": "Bearer not-a-token"}
    assert_error(anyone.get("/api/v1/tasks", headers=bad_token), 401)


def test_configured_hosts_and_ports(tmp_path: Path) -> None:
    service = Service.open(tmp_path / "data")
    try:
        app = create_app(service, allowed_hosts=["127.0.0.1:8000", "eval.example.org"])
        client = app.test_client()
        assert client.get("/api/v1/tasks", headers={"Host": "127.0.0.1:8000"}).status_code == 200
        assert (
            client.get("/api/v1/tasks", headers={"Host": "eval.example.org:443"}).status_code == 200
        )
        assert_error(client.get("/api/v1/tasks", headers={"Host": "127.0.0.1:9000"}), 421)
        assert_error(client.get("/api/v1/tasks", headers={"Host": "localhost:8000"}), 421)
    finally:
        service.close()


@pytest.mark.parametrize(
    ("host", "allowed", "expected"),
    [
        ("[::1]:8000", ["[::1]"], True),
        ("[::1]:8000", ["[::1]:8000"], True),
        ("[::1]:8001", ["[::1]:8000"], False),
        ("LOCALHOST", ["localhost"], True),
        ("127.0.0.1:80", ["127.0.0.1:8000"], False),
    ],
)
def test_host_matching(host: str, allowed: list[str], expected: bool) -> None:
    assert host_allowed(host, allowed) is expected


# -- the store -------------------------------------------------------------------------------
def test_user_names_are_unique_and_checked(world: World) -> None:
    with pytest.raises(AccountError, match="already"):
        world.accounts.add_user("alice", "researcher")
    for bad in ("", "a b", "x" * 65, "../etc"):
        with pytest.raises(AccountError):
            world.accounts.add_user(bad, "researcher")
    with pytest.raises(AccountError):
        world.accounts.add_user("short", "researcher", "1234567")
