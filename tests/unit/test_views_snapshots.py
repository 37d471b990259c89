"""Saved leaderboard views and snapshots through the real app: creating, listing and
reading views, a task's default view changing the leaderboard's default order (set only by
its owner or an admin), weight validation, snapshots frozen against new results, and
private tasks answering 404."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from api.app import create_app
from configs.vocabulary.clock import ManualClock
from store.accounts import Accounts
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import AXES_A, AXES_B, assert_error, finished
from usecases.service import Service

# Model b wins when memory counts and performance does not.
LEAN = {"name": "Lean & fast", "weights": {"performance": 0, "memory": 5}}


@dataclasses.dataclass
class World:
    app: Flask
    service: Service
    clock: ManualClock
    tokens: dict[str, str]
    ids: dict[str, str]

    def client(self, role: str = "anonymous") -> FlaskClient:
        client = self.app.test_client()
        return client if role == "anonymous" else signed_in(client, self.tokens[role])


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    clock = ManualClock()
    service = Service.open(tmp_path / "data", clock=clock)
    tokens = {
        "admin": issue_token(service, "admin", "admin"),
        "alice": issue_token(service, "alice", "researcher"),
        "carol": issue_token(service, "carol", "researcher"),
    }
    accounts = Accounts(service.db, clock)
    accounts.set_task_access("sentiment", "carol", private=False)
    accounts.set_task_access("qa", "carol", private=True)
    ids = {
        "a": finished(service, "model-a", AXES_A),
        "b": finished(service, "model-b", AXES_B),
        "qa": finished(service, "qa-model", AXES_A, task="qa"),
    }
    yield World(create_app(service), service, clock, tokens, ids)
    service.close()


def _order(client: FlaskClient, query: str = "") -> list[str]:
    response = client.get(f"/api/v1/tasks/sentiment/leaderboard{query}")
    assert response.status_code == 200, response.get_json()
    return [m["name"] for m in response.get_json()["models"]]


def _create_view(world: World, role: str = "alice", body: Any = None) -> dict[str, Any]:
    response = world.client(role).post("/api/v1/tasks/sentiment/views", json=body or LEAN)
    assert response.status_code == 201, response.get_json()
    created: dict[str, Any] = response.get_json()
    return created


# -- views -----------------------------------------------------------------------------------
def test_a_signed_in_user_creates_lists_and_reads_views(world: World) -> None:
    view = _create_view(world)
    assert view["slug"] == "lean-fast" and view["name"] == "Lean & fast"
    assert view["weights"]["performance"] == 0 and view["weights"]["memory"] == 5
    assert view["weights"]["robustness"] == 1  # axes left out keep the task's defaults
    assert set(view["round_weights"]) == {s.name for s in world.service.tasks["sentiment"].rounds}
    assert view["default"] is False and "owner_id" not in view
    again = _create_view(world, "carol")
    assert again["slug"] == "lean-fast-2"  # slugs stay unique within the task

    listed = world.client().get("/api/v1/tasks/sentiment/views").get_json()["views"]
    assert [v["id"] for v in listed] == [view["id"], again["id"]]
    assert world.client().get(f"/api/v1/views/{view['id']}").get_json() == view
    assert_error(world.client().get("/api/v1/views/no-such-view"), 404, "unknown_view")
    assert_error(world.client().post("/api/v1/tasks/sentiment/views", json=LEAN), 401)


def test_a_view_url_restores_its_weights_on_the_page(world: World) -> None:
    view = _create_view(world, body={**LEAN, "round_weights": {"r1": 2}})
    for key in (view["slug"], view["id"]):
        page = world.client().get(f"/tasks/sentiment/views/{key}")
        assert page.status_code == 200  # the view's own page, ranked for its weights
        html = page.get_data(as_text=True)
        assert 'id="w_performance" name="w_performance" min="0" max="5" step="0.5"\n' in html
        assert 'value="0.0" data-axis="performance"' in html
        assert 'value="5.0" data-axis="memory"' in html
        assert 'value="2.0" data-round="r1"' in html
    assert world.client().get("/tasks/sentiment/views/nope").status_code == 404


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"name": "x", "weights": {"speed": 1}}, "invalid_weights"),
        ({"name": "x", "weights": {"performance": 0, "throughput": 0, "memory": 0,
                                   "robustness": 0, "fairness": 0}}, "invalid_weights"),
        ({"name": "x", "round_weights": {"r9": 1}}, "invalid_weights"),
        ({"name": "x", "round_weights": {"r1": 0, "r2": 0, "r3": 0}}, "invalid_weights"),
        ({"name": "x", "weights": {"performance": -1}}, None),
        ({"name": "x", "weights": {"performance": "a lot"}}, None),
        ({"weights": {"performance": 1}}, None),
        ({"name": "", "weights": {}}, None),
    ],
)  # fmt: skip
def test_bad_weights_are_422(world: World, body: dict[str, Any], code: str | None) -> None:
    response = world.client("alice").post("/api/v1/tasks/sentiment/views", json=body)
    assert_error(response, 422, code)
    assert world.client().get("/api/v1/tasks/sentiment/views").get_json()["views"] == []


# -- the default view ------------------------------------------------------------------------
def test_the_default_view_changes_the_leaderboards_default_order(world: World) -> None:
    assert _order(world.client()) == ["model-a", "model-b"]
    view = _create_view(world)
    assert _order(world.client()) == ["model-a", "model-b"]  # saved, not yet the default
    put = world.client("carol").put(
        "/api/v1/tasks/sentiment/default-view", json={"view": view["slug"]}
    )
    assert put.status_code == 200, put.get_json()
    assert put.get_json()["view"]["default"] is True
    assert _order(world.client()) == ["model-b", "model-a"]
    board = world.client().get("/api/v1/tasks/sentiment/leaderboard").get_json()
    assert board["weights"] == view["weights"]
    # Axes the viewer names override the default view's.
    assert _order(world.client(), "?weights=performance:4,memory:1") == ["model-a", "model-b"]
    page = world.client().get("/tasks/sentiment").get_data(as_text=True)
    assert page.index("model-b") < page.index("model-a")
    download = world.client().get("/api/v1/tasks/sentiment/leaderboard/download?format=json")
    assert [m["name"] for m in download.get_json()["models"]] == ["model-b", "model-a"]
    listed = world.client().get("/api/v1/tasks/sentiment/views").get_json()["views"]
    assert [v["default"] for v in listed] == [True]

    cleared = world.client("admin").put("/api/v1/tasks/sentiment/default-view", json={"view": None})
    assert cleared.status_code == 200 and cleared.get_json()["view"] is None
    assert _order(world.client()) == ["model-a", "model-b"]


def test_only_the_task_owner_or_an_admin_sets_the_default(world: World) -> None:
    view = _create_view(world)
    path, body = "/api/v1/tasks/sentiment/default-view", {"view": view["id"]}
    assert_error(world.client().put(path, json=body), 401)
    assert_error(world.client("alice").put(path, json=body), 403, "not_task_owner")
    assert _order(world.client()) == ["model-a", "model-b"]
    assert world.client("admin").put(path, json=body).status_code == 200
    assert_error(world.client("carol").put(path, json={"view": "nope"}), 404, "unknown_view")
    assert_error(world.client("carol").put(path, json={}), 422)
    # A view of another task is not this task's.
    qa_view = world.client("carol").post("/api/v1/tasks/qa/views", json=LEAN).get_json()
    assert_error(world.client("carol").put(path, json={"view": qa_view["id"]}), 404)


# -- snapshots -------------------------------------------------------------------------------
def test_a_snapshot_is_the_leaderboard_then_and_never_changes(world: World) -> None:
    board = world.client().get("/api/v1/tasks/sentiment/leaderboard?limit=10000").get_json()
    created = world.client("alice").post("/api/v1/tasks/sentiment/snapshots", json={})
    assert created.status_code == 201, created.get_json()
    snapshot = created.get_json()
    assert {**snapshot["leaderboard"], "limit": 10000} == board  # the whole board then
    assert snapshot["weights"] == board["weights"]
    assert snapshot["dataset_hashes"] == world.service.dataset_hashes("sentiment")
    assert snapshot["code_version"] and snapshot["created_at"] == "2026-01-01T00:00:00Z"
    path = f"/api/v1/snapshots/{snapshot['id']}"
    before = world.client().get(path).get_data()
    page_before = world.client().get(snapshot["url"]).get_data()

    world.clock.advance(3600)
    finished(world.service, "model-new", {**AXES_A, "performance": 99.0})
    assert _order(world.client())[0] == "model-new"  # the live board moved on
    assert world.client().get(path).get_data() == before  # the snapshot did not
    assert world.client().get(snapshot["url"]).get_data() == page_before
    page = page_before.decode()
    assert "snapshot" in page and "2026-01-01" in page and "model-new" not in page


def test_a_snapshot_takes_the_weights_given(world: World) -> None:
    body = {"weights": {"performance": 0, "memory": 5}}
    snapshot = world.client("alice").post("/api/v1/tasks/sentiment/snapshots", json=body)
    assert snapshot.status_code == 201
    assert [m["name"] for m in snapshot.get_json()["leaderboard"]["models"]] == [
        "model-b",
        "model-a",
    ]
    bad = {"weights": {"nope": 1}}
    assert_error(world.client("alice").post("/api/v1/tasks/sentiment/snapshots", json=bad), 422)
    assert_error(world.client().post("/api/v1/tasks/sentiment/snapshots", json={}), 401)
    assert_error(world.client("alice").get("/api/v1/snapshots/nope"), 404, "unknown_snapshot")


def test_a_private_tasks_views_and_snapshots_are_404_to_others(world: World) -> None:
    carol = world.client("carol")
    view = carol.post("/api/v1/tasks/qa/views", json=LEAN).get_json()
    snapshot = carol.post("/api/v1/tasks/qa/snapshots", json={}).get_json()
    assert carol.get(f"/api/v1/snapshots/{snapshot['id']}").status_code == 200
    assert carol.get(snapshot["url"]).status_code == 200
    for role in ("anonymous", "alice"):
        client = world.client(role)
        assert_error(client.get("/api/v1/tasks/qa/views"), 404, "unknown_task")
        assert_error(client.get(f"/api/v1/views/{view['id']}"), 404, "unknown_view")
        assert_error(client.get(f"/api/v1/snapshots/{snapshot['id']}"), 404, "unknown_snapshot")
        assert client.get(snapshot["url"]).status_code == 404
        assert client.get(f"/tasks/qa/views/{view['slug']}").status_code == 404
    assert_error(world.client("alice").post("/api/v1/tasks/qa/snapshots", json={}), 404)
    assert_error(world.client("alice").post("/api/v1/tasks/qa/views", json=LEAN), 404)


def test_the_default_views_round_weights_apply_when_no_weights_are_given(world: World) -> None:
    # The models were scored on r1 only: with r1 at 0 their round-based axes are unknown.
    view = _create_view(world, body={"name": "later rounds", "round_weights": {"r1": 0}})
    put = world.client("admin").put(
        "/api/v1/tasks/sentiment/default-view", json={"view": view["id"]}
    )
    assert put.status_code == 200
    board = world.client().get("/api/v1/tasks/sentiment/leaderboard").get_json()
    assert board["models"] == [] and len(board["unranked"]) == 2
    assert _order(world.client(), "?weights=performance:4") == ["model-a", "model-b"]
    snapshot = world.client("alice").post("/api/v1/tasks/sentiment/snapshots", json={})
    assert snapshot.get_json()["round_weights"]["r1"] == 0
    frozen = snapshot.get_json()["leaderboard"]
    assert frozen["limit"] is None and board["limit"] == 100  # a snapshot holds every model
    assert {**frozen, "limit": 100} == board


def test_a_view_is_deleted_by_who_saved_it_the_task_owner_or_an_admin(world: World) -> None:
    view = _create_view(world)  # alice's
    path = f"/api/v1/views/{view['id']}"
    world.tokens["bob"] = issue_token(world.service, "bob", "researcher")
    assert_error(world.client().delete(path), 401)
    assert_error(world.client("bob").delete(path), 403, "not_view_owner")
    put = world.client("carol").put(
        "/api/v1/tasks/sentiment/default-view", json={"view": view["id"]}
    )
    assert put.status_code == 200 and _order(world.client()) == ["model-b", "model-a"]
    deleted = world.client("alice").delete(path)
    assert deleted.status_code == 200 and deleted.get_json()["id"] == view["id"]
    assert_error(world.client().get(path), 404, "unknown_view")
    assert world.client().get("/api/v1/tasks/sentiment/views").get_json()["views"] == []
    assert _order(world.client()) == ["model-a", "model-b"]  # the task's own default again
    assert_error(world.client("alice").delete(path), 404, "unknown_view")
    other = _create_view(world, "bob")
    assert world.client("carol").delete(f"/api/v1/views/{other['id']}").status_code == 200
