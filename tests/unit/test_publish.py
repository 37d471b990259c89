"""Publishing a model (``PUT /api/v1/submissions/<id>/publication`` and the model page's
button): every role against the new route, a published model's page, scores and API reads
public (never its failure nor log tail; never a private task's), and unpublishing."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, g
from flask.testing import FlaskClient
from sqlalchemy import update

from api.app import create_app
from api.auth import SESSION_COOKIE
from api.errors import ApiError
from api.pages.visibility import readable_submission
from configs.vocabulary.clock import ManualClock
from store.accounts import SESSION, Accounts
from store.models import JobRow
from store.rules.principals import ANONYMOUS, ROLE_SCOPES
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import AXES_A, AXES_B, DOCKER, assert_error, finished
from usecases.service import Service

ROLES = ("anonymous", "alice", "bob", "carol", "admin", "alice_read", "alice_submit")
SECRET_LOG = "Traceback: the model's own secret log line"


@dataclasses.dataclass
class World:
    app: Flask
    service: Service
    tokens: dict[str, str]
    ids: dict[str, str]

    def client(self, role: str = "anonymous") -> FlaskClient:
        client = self.app.test_client()
        return client if role == "anonymous" else signed_in(client, self.tokens[role])

    def publish(self, key: str, published: bool = True, role: str = "alice") -> Any:
        path = f"/api/v1/submissions/{self.ids[key]}/publication"
        return self.client(role).put(path, json={"published": published})


def _owned(service: Service, owner: str, name: str, task: str = "sentiment") -> str:
    model_id = finished(service, name, AXES_A if name.endswith("a") else AXES_B, task=task)
    accounts = Accounts(service.db)
    user = accounts.user_by_name(owner)
    assert user is not None
    accounts.set_model_owner(model_id, user["id"])
    return model_id


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], dict]:
    """Users, tokens and models made once; every test starts from a copy."""
    folder = tmp_path_factory.mktemp("publish") / "data"
    service = Service.open(folder, clock=ManualClock())
    tokens = {
        "admin": issue_token(service, "admin", "admin"),
        "alice": issue_token(service, "alice", "researcher"),
        "bob": issue_token(service, "bob", "researcher"),
        "carol": issue_token(service, "carol", "researcher"),
        "alice_read": issue_token(service, "alice", scopes=["read"]),
        "alice_submit": issue_token(service, "alice", scopes=["submit"]),
    }
    accounts = Accounts(service.db)
    accounts.set_task_access("sentiment", "carol", private=False)
    accounts.set_task_access("qa", "carol", private=True)
    ids = {
        "alice": _owned(service, "alice", "alice-model-a"),
        "bob": _owned(service, "bob", "bob-model-b"),
        "alice_qa": _owned(service, "alice", "alice-qa-a", task="qa"),
        "guessed": "00000000-0000-0000-0000-000000000000",
    }
    # alice's failed submission, whose failure and log tail must never go public
    failed_id, job_id = service.store.submit("sentiment", "alice-broken", DOCKER)
    accounts.set_model_owner(failed_id, accounts.user_by_name("alice")["id"])  # type: ignore[index]
    service.store.cancel(failed_id, "cancelled")
    with service.db.session() as session, session.begin():
        session.execute(update(JobRow).where(JobRow.id == job_id).values(log_tail=SECRET_LOG))
    ids["failed"] = failed_id
    service.close()
    return folder, tokens, ids


@pytest.fixture
def world(template: tuple[Path, dict[str, str], dict], tmp_path: Path) -> Iterator[World]:
    folder, tokens, ids = template
    shutil.copytree(folder, tmp_path / "data")
    service = Service.open(tmp_path / "data", clock=ManualClock())
    yield World(create_app(service), service, tokens, ids)
    service.close()


# -- the route, every role -------------------------------------------------------------------
PUBLISH_TABLE = {
    # the submitter (with the submit scope and able to read it) or an admin; the task's
    # owner sees it but does not decide; others do not see it
    "alice": {"anonymous": 401, "alice_read": 403, "alice": 200, "carol": 403, "admin": 200},
    "bob": {"anonymous": 401, "alice_read": 403, "bob": 200, "carol": 403, "admin": 200},
    "guessed": {"anonymous": 401, "alice_read": 403},
}


@pytest.mark.parametrize("key", sorted(PUBLISH_TABLE))
def test_every_role_against_the_publication_route(world: World, key: str) -> None:
    for role in ROLES:
        status = PUBLISH_TABLE[key].get(role, 404)
        response = world.publish(key, True, role)
        assert response.status_code == status, (role, response.get_data(as_text=True))
        if status == 200:
            assert response.get_json() == {"id": world.ids[key], "published": True}
            assert world.publish(key, False, role).get_json()["published"] is False
        else:
            assert_error(response, status)


def test_once_published_others_get_403_not_404(world: World) -> None:
    assert world.publish("alice").status_code == 200
    for role in ("bob", "carol"):
        assert_error(world.publish("alice", False, role), 403, "not_owner")
    # the submitter's submit-only token may take it back once it can read it (published)
    assert world.publish("alice", False, "alice_submit").get_json()["published"] is False
    assert_error(world.publish("alice", True, "alice_submit"), 404, "unknown_submission")
    path = f"/api/v1/submissions/{world.ids['alice']}/publication"
    assert_error(world.client("bob").put(path, json={"published": "maybe"}), 422)


# -- what publishing shows -------------------------------------------------------------------
def test_a_published_models_page_and_scores_are_public(world: World) -> None:
    anonymous = world.client()
    page = f"/models/{world.ids['alice']}"
    scores = f"/api/v1/submissions/{world.ids['alice']}/scores/download"
    assert anonymous.get(page).status_code == 404
    board = anonymous.get("/tasks/sentiment").get_data(as_text=True)
    assert f'href="{page}"' not in board
    assert world.publish("alice").status_code == 200
    shown = anonymous.get(page)
    assert shown.status_code == 200 and "alice-model-a" in shown.get_data(as_text=True)
    assert 'id="publish"' not in shown.get_data(as_text=True)  # no button for strangers
    downloaded = anonymous.get(scores)
    assert downloaded.status_code == 200 and "macro_f1" in downloaded.get_data(as_text=True)
    board = anonymous.get("/tasks/sentiment").get_data(as_text=True)
    assert f'href="{page}"' in board  # the leaderboard links it now
    assert world.publish("alice", False).status_code == 200
    assert anonymous.get(page).status_code == 404 and anonymous.get(scores).status_code == 404


def test_a_private_tasks_published_model_stays_private(world: World) -> None:
    # alice no longer sees the private task (404); an admin publishes her model for her
    assert_error(world.publish("alice_qa"), 404, "unknown_submission")
    assert world.publish("alice_qa", True, "admin").status_code == 200
    page = f"/models/{world.ids['alice_qa']}"
    assert world.client().get(page).status_code == 404
    assert world.client("bob").get(page).status_code == 404
    assert world.client("carol").get(page).status_code == 200


def test_the_owner_publishes_with_the_model_pages_button(world: World) -> None:
    accounts = Accounts(world.service.db, world.service.clock)
    alice = accounts.user_by_name("alice")
    assert alice is not None
    scopes = sorted(ROLE_SCOPES["researcher"])
    session = accounts.create_token(alice["id"], "login", scopes, kind=SESSION).secret
    browser = world.app.test_client()
    browser.set_cookie(SESSION_COOKIE, session)
    page = f"/models/{world.ids['alice']}"
    assert 'id="publish"' in browser.get(page).get_data(as_text=True)
    ours = {"Origin": "http://localhost"}
    done = browser.post(f"{page}/publication", data={"published": "true"}, headers=ours)
    assert done.status_code == 303 and done.location == page
    assert "Unpublish" in browser.get(page).get_data(as_text=True)
    assert world.client().get(page).status_code == 200
    foreign = {"Origin": "https://evil.example"}
    refused = browser.post(f"{page}/publication", data={"published": "false"}, headers=foreign)
    assert refused.status_code == 403 and refused.mimetype == "text/html"
    assert world.client().get(page).status_code == 200  # still published
    stranger = world.app.test_client().post(f"{page}/publication", headers=ours)
    assert stranger.status_code == 401 and "Sign in first" in stranger.get_data(as_text=True)


def _read(world: World, key: str, role: str = "anonymous", **kwargs: bool) -> dict[str, Any]:
    """``readable_submission`` as a request of ``role`` would see it."""
    headers = {} if role == "anonymous" else {"Authorization": f"Bearer {world.tokens[role]}"}
    with world.app.test_request_context("/", headers=headers):
        world.app.preprocess_request()
        assert g.get("principal", ANONYMOUS) is not None
        return readable_submission(world.ids[key], **kwargs)


def test_api_reads_of_a_published_model_never_show_its_failure(world: World) -> None:
    with pytest.raises(ApiError) as hidden:
        _read(world, "failed")
    assert hidden.value.status == 404
    assert _read(world, "failed", "alice")["job"]["failure"]["log_tail"] == SECRET_LOG
    assert world.publish("failed").status_code == 200
    for role in ("anonymous", "bob", "alice_submit"):
        shown = _read(world, "failed", role)
        assert SECRET_LOG not in str(shown) and shown["job"]["failure"] is None
        assert all(a["failure_message"] is None for a in shown["job"]["attempt_history"])
    assert _read(world, "failed", "carol")["job"]["failure"]["log_tail"] == SECRET_LOG
    assert world.publish("alice").status_code == 200
    scores = _read(world, "alice", "anonymous", with_scores=True)["scores"]
    assert scores and {"round", "dataset_hash", "metric", "value"} <= set(scores[0])


def test_the_apis_submission_routes_follow_publication(world: World) -> None:
    path = f"/api/v1/submissions/{world.ids['failed']}"
    assert_error(world.client().get(path), 404, "unknown_submission")
    assert world.publish("failed").status_code == 200
    body = world.client().get(path).get_json()
    assert body["job"]["failure"] is None and SECRET_LOG not in str(body)
    assert world.client("alice").get(path).get_json()["job"]["failure"]["log_tail"] == SECRET_LOG
    assert world.publish("alice").status_code == 200
    scores = world.client().get(f"/api/v1/submissions/{world.ids['alice']}/scores")
    assert scores.status_code == 200 and scores.get_json()["scores"]


def test_publication_is_chosen_at_submission_and_the_error_page_tells_the_truth(
    world: World,
) -> None:
    """No anonymous viewer could open a model: nothing was published unless its submitter
    found the button later, and the page said "no scored model" of a scored one."""
    import io

    from tests.unit.test_api import image_tar

    anonymous = world.client()
    unpublished = anonymous.get(f"/models/{world.ids['alice']}").get_data(as_text=True)
    assert "not published" in unpublished and "no scored model" not in unpublished
    assert "no scored model" in anonymous.get("/models/no-such-model").get_data(as_text=True)

    alice = world.client("alice")
    chosen = alice.post(
        "/api/v1/tasks/sentiment/submissions",
        json={"name": "public-at-once", "runtime": DOCKER, "publish": True},
    )
    assert chosen.status_code == 201, chosen.get_json()
    form = {"name": "uploaded", "publish": "true", "image": (io.BytesIO(image_tar()), "m.tar")}
    uploaded = alice.post(
        "/api/v1/tasks/sentiment/submissions", data=form, content_type="multipart/form-data"
    )
    assert uploaded.status_code == 201, uploaded.get_json()
    default = alice.post(
        "/api/v1/tasks/sentiment/submissions", json={"name": "quiet", "runtime": DOCKER}
    )
    accounts = Accounts(world.service.db)
    published = {
        key: accounts.model_publication(answer.get_json()["id"]).published  # type: ignore[union-attr]
        for key, answer in (("json", chosen), ("form", uploaded), ("default", default))
    }
    assert published == {"json": True, "form": True, "default": False}
    assert_error(
        alice.post(
            "/api/v1/tasks/sentiment/submissions",
            json={"name": "bad", "runtime": DOCKER, "publish": "maybe"},
        ),
        422,
    )


def test_a_task_publishes_by_default_when_its_yaml_says_so(world: World) -> None:
    task = dataclasses.replace(world.service.tasks["sentiment"], publish_results=True)
    world.service.tasks["sentiment"] = task  # pinned in this process
    made = world.client("alice").post(
        "/api/v1/tasks/sentiment/submissions", json={"name": "loud", "runtime": DOCKER}
    )
    assert made.status_code == 201, made.get_json()
    found = Accounts(world.service.db).model_publication(made.get_json()["id"])
    assert found is not None and found.published is True
