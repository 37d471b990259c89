"""The pages' account features through the real app: the login form (cookie, errors as a
sentence, rate limit, no open redirect, cross-site refusal), signing out, the leaderboard's
snapshot and view forms, and a saved view's own page."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask, render_template
from flask.testing import FlaskClient

from api.app import create_app
from api.auth import SESSION_COOKIE
from api.ratelimit import TokenBuckets
from configs.vocabulary.clock import ManualClock
from store.accounts import ROLE_SCOPES, SESSION, Accounts
from store.views import Views
from tests.unit.test_api import AXES_A, AXES_B, finished
from usecases.service import Service

OURS = {"Origin": "http://localhost"}
PASSWORD = "correct horse"


@dataclasses.dataclass
class World:
    app: Flask
    service: Service
    accounts: Accounts

    def client(self, name: str | None = None) -> FlaskClient:
        """A browser, signed in as ``name`` when given (a session made directly: the
        login form's own tests sign in through the form)."""
        client = self.app.test_client()
        if name is not None:
            user = self.accounts.user_by_name(name)
            assert user is not None
            scopes = sorted(ROLE_SCOPES[user["role"]])
            issued = self.accounts.create_token(user["id"], "login", scopes, kind=SESSION)
            client.set_cookie(SESSION_COOKIE, issued.secret)
        return client


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder with the users and models, made once: argon2 hashes are slow on
    purpose, and every test starts from a copy."""
    folder = tmp_path_factory.mktemp("pages-accounts") / "data"
    service = Service.open(folder, clock=ManualClock())
    accounts = Accounts(service.db, service.clock)
    accounts.add_user("alice", "researcher", PASSWORD)
    accounts.add_user("admin", "admin")
    accounts.add_user("carol", "researcher")
    accounts.set_task_access("sentiment", "carol", private=False)
    accounts.set_task_access("qa", "carol", private=True)
    finished(service, "model-a", AXES_A)
    finished(service, "model-b", AXES_B)
    service.close()
    return folder


@pytest.fixture
def world(template: Path, tmp_path: Path) -> Iterator[World]:
    shutil.copytree(template, tmp_path / "data")
    service = Service.open(tmp_path / "data", clock=ManualClock())
    yield World(create_app(service), service, Accounts(service.db, service.clock))
    service.close()


def _html(response) -> str:  # type: ignore[no-untyped-def]
    assert response.mimetype == "text/html", response.get_data(as_text=True)
    return str(response.get_data(as_text=True))


# -- signing in and out ----------------------------------------------------------------------
def test_the_login_form_signs_in_with_the_apis_cookie_and_goes_back(world: World) -> None:
    client = world.app.test_client()
    page = _html(client.get("/login?next=/tasks/sentiment"))
    assert 'name="next" value="/tasks/sentiment"' in page and 'type="password"' in page
    form = {"name": "alice", "password": PASSWORD, "next": "/tasks/sentiment?weights=x"}
    response = client.post("/login", data=form, headers=OURS)
    assert response.status_code == 303 and response.location == "/tasks/sentiment?weights=x"
    cookie = response.headers["Set-Cookie"]
    assert "dynaeval_session=dyn_" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    header = _html(client.get("/tasks/sentiment"))
    assert "signed in as <strong>alice</strong>" in header and 'id="sign-out"' in header
    assert client.get("/api/v1/me").get_json()["name"] == "alice"
    # over https (not loopback http) the cookie is Secure, as the API's
    secure = world.app.test_client().post(
        "/login", data=form, headers={"Origin": "https://localhost"}, base_url="https://localhost"
    )
    assert "Secure" in secure.headers["Set-Cookie"]


def test_a_wrong_password_is_a_sentence_on_the_form_not_json(world: World) -> None:
    client = world.app.test_client()
    response = client.post("/login", data={"name": "alice", "password": "nope"}, headers=OURS)
    assert response.status_code == 401 and "Set-Cookie" not in response.headers
    assert "Wrong user name or password." in _html(response)
    missing = client.post("/login", data={"name": "alice"}, headers=OURS)
    assert missing.status_code == 400 and "Enter your user name and password." in _html(missing)
    unknown = client.post("/login", data={"name": "nobody", "password": "x"}, headers=OURS)
    assert unknown.status_code == 401 and "Wrong user name or password." in _html(unknown)


def test_logins_on_the_form_share_the_apis_rate_limit(world: World) -> None:
    limiter = world.app.extensions["dynaeval_ratelimit"]
    limiter.logins = TokenBuckets(4, 60.0, world.service.clock)  # 4 a minute, clock stopped
    client = world.app.test_client()
    bad = {"name": "alice", "password": "nope"}
    assert client.post("/api/v1/session", json=bad, headers=OURS).status_code == 401
    for _ in range(3):
        assert client.post("/login", data=bad, headers=OURS).status_code == 401
    limited = client.post("/login", data={**bad, "password": PASSWORD}, headers=OURS)
    assert limited.status_code == 429 and limited.headers["Retry-After"]
    assert "too many logins" in _html(limited) and "Set-Cookie" not in limited.headers


def test_next_is_only_ever_a_local_path(world: World) -> None:
    client = world.app.test_client()
    for target in ("//evil.example/x", "https://evil.example/", "/\\evil.example", "evil", ""):
        form = {"name": "alice", "password": "wrong", "next": target}
        page = _html(client.post("/login", data=form, headers=OURS))
        assert 'name="next" value="/"' in page  # the form posts back to a local path only
    for target in ("/\r\nX: y", "//evil.example"):
        assert 'name="next" value="/"' in _html(client.get("/login", query_string={"next": target}))
    form = {"name": "alice", "password": PASSWORD, "next": "//evil.example/x"}
    response = client.post("/login", data=form, headers=OURS)
    assert response.status_code == 303 and response.location == "/"


def test_a_foreign_origin_is_refused_on_the_forms(world: World) -> None:
    foreign = {"Origin": "https://evil.example"}
    form = {"name": "alice", "password": PASSWORD}
    login = world.app.test_client().post("/login", data=form, headers=foreign)
    assert login.status_code == 403 and "Set-Cookie" not in login.headers
    assert "ross-site write" in _html(login)
    client = world.client("alice")
    frozen = client.post("/tasks/sentiment/snapshots", data={}, headers=foreign)
    assert frozen.status_code == 403 and "ross-site write" in _html(frozen)
    saved = client.post("/tasks/sentiment/views", data={"name": "x"}, headers=foreign)
    assert saved.status_code == 403
    # nothing was stored, and a cookie without Origin nor CSRF token is refused too
    assert client.post("/tasks/sentiment/snapshots", data={}).status_code == 403
    assert Views(world.service.db).views("sentiment") == []
    assert client.post("/logout", headers=foreign).status_code == 403
    assert client.get("/api/v1/me").status_code == 200  # still signed in


def test_signing_out_revokes_the_session(world: World) -> None:
    client = world.client("alice")
    cookie = client.get_cookie("dynaeval_session")
    assert cookie is not None
    response = client.post("/logout", data={"next": "/tasks/sentiment"}, headers=OURS)
    assert response.status_code == 303 and response.location == "/tasks/sentiment"
    assert client.get_cookie("dynaeval_session") is None
    again = world.app.test_client()
    again.set_cookie("dynaeval_session", cookie.value)
    assert again.get("/api/v1/me").status_code == 401  # the old cookie is dead
    assert 'id="sign-in-link"' in _html(again.get("/", headers={"Accept": "text/html"}))


# -- the leaderboard's forms -----------------------------------------------------------------
def _actions(world: World, client: FlaskClient) -> str:
    """The leaderboard's actions partial, rendered in the task page's context."""
    task_page = world.app.view_functions["pages.task_page"]
    with world.app.test_request_context("/tasks/sentiment?weights=performance:2"):
        world.app.preprocess_request()  # who asks, as a real request
        task_page("sentiment")  # the page renders; its context is the partial's
        return render_template(
            "pages/_board_actions.html",
            task=world.service.tasks["sentiment"],
            query={"weights": "performance:2,memory:1"},
        )


def test_the_actions_offer_forms_to_signed_in_users_and_a_link_to_others(world: World) -> None:
    anonymous = _actions(world, world.app.test_client())
    assert "Sign in to save a snapshot or a view" in anonymous and "<form" not in anonymous
    assert 'href="/login?next=/tasks/sentiment' in anonymous


def test_freeze_a_snapshot_with_the_button(world: World) -> None:
    client = world.client("alice")
    form = {"weights": "performance:0,memory:5", "rounds": ""}
    response = client.post("/tasks/sentiment/snapshots", data=form, headers=OURS)
    assert response.status_code == 303 and response.location.startswith("/snapshots/")
    snapshot_id = response.location.rsplit("/", 1)[1]
    frozen = client.get(f"/api/v1/snapshots/{snapshot_id}").get_json()
    assert frozen["weights"]["performance"] == 0 and frozen["weights"]["memory"] == 5
    assert [m["name"] for m in frozen["leaderboard"]["models"]] == ["model-b", "model-a"]
    assert client.get(response.location).status_code == 200
    bad = client.post("/tasks/sentiment/snapshots", data={"rounds": "r9:1"}, headers=OURS)
    assert bad.status_code == 422 and "no round" in _html(bad)
    anonymous = world.app.test_client().post("/tasks/sentiment/snapshots", headers=OURS)
    assert anonymous.status_code == 401 and "Sign in first" in _html(anonymous)
    hidden = client.post("/tasks/qa/snapshots", data={}, headers=OURS)
    assert hidden.status_code == 404  # a private task is not there for outsiders


def test_save_a_view_and_open_its_page(world: World) -> None:
    client = world.client("alice")
    form = {"name": "Lean & fast", "weights": "performance:0,memory:5", "rounds": "r1:2"}
    response = client.post("/tasks/sentiment/views", data=form, headers=OURS)
    assert response.status_code == 303 and response.location == "/tasks/sentiment/views/lean-fast"
    page = _html(world.app.test_client().get(response.location))
    assert "View “Lean &amp; fast”" in page and '<strong id="saved-by">alice</strong>' in page
    assert "Not the task's default view." in page and 'id="make-default"' not in page
    assert 'value="0.0" data-axis="performance"' in page and 'value="2.0" data-round="r1"' in page
    assert page.count('id="leaderboard"') == 1  # the task page's board, rendered once
    form = {"name": "lean", "weights": "performance:0,memory:5"}
    saved = client.post("/tasks/sentiment/views", data=form, headers=OURS)
    lean = _html(client.get(saved.location))
    ranked = lean.index('<table id="leaderboard"')
    assert lean.index(">model-b<", ranked) < lean.index(">model-a<", ranked)  # the view's order
    empty = client.post("/tasks/sentiment/views", data={"name": " "}, headers=OURS)
    assert empty.status_code == 422


@pytest.mark.parametrize("field", ["weights", "rounds"])
def test_a_view_saved_by_the_form_keeps_the_apis_bound_on_weights(world: World, field: str) -> None:
    """The JSON route refuses a weight over 1,000,000; the page's form stored one (outside
    tester): a view obeys one rule whichever way it is saved."""
    client = world.client("alice")
    text = "performance:1000001" if field == "weights" else "r1:1000001"
    refused = client.post(
        "/tasks/sentiment/views", data={"name": "huge", field: text}, headers=OURS
    )
    assert refused.status_code == 422 and "1000000" in _html(refused)
    at_the_bound = {"name": "bound", field: text.replace("1000001", "1000000")}
    assert client.post("/tasks/sentiment/views", data=at_the_bound, headers=OURS).status_code == 303


def test_the_task_owner_makes_a_view_the_default_on_its_page(world: World) -> None:
    world.client("alice").post(
        "/tasks/sentiment/views", data={"name": "lean", "weights": "memory:5"}, headers=OURS
    )
    alice = world.client("alice")
    refused = alice.post("/tasks/sentiment/views/lean/default", headers=OURS)
    assert refused.status_code == 403 and "owner" in _html(refused)
    carol = world.client("carol")
    assert 'id="make-default"' in _html(carol.get("/tasks/sentiment/views/lean"))
    done = carol.post("/tasks/sentiment/views/lean/default", headers=OURS)
    assert done.status_code == 303
    page = _html(carol.get("/tasks/sentiment/views/lean"))
    assert "This is the task's default view" in page and 'id="make-default"' not in page
    missing = carol.post("/tasks/sentiment/views/nope/default", headers=OURS)
    assert missing.status_code == 404


def test_unknown_deleted_and_private_views_are_404_pages(world: World) -> None:
    assert world.app.test_client().get("/tasks/sentiment/views/nope").status_code == 404
    assert world.app.test_client().get("/tasks/nope/views/x").status_code == 404
    admin = world.client("admin")
    admin.post("/tasks/qa/views", data={"name": "secret"}, headers=OURS)
    assert admin.get("/tasks/qa/views/secret").status_code == 200
    assert world.client("alice").get("/tasks/qa/views/secret").status_code == 404
    view = Views(world.service.db).find_view("qa", "secret")
    assert view is not None
    Views(world.service.db).delete_view(view["id"])
    gone = admin.get("/tasks/qa/views/secret")
    assert gone.status_code == 404 and "has no view" in _html(gone)


def test_the_login_pages_hint_names_a_command_that_exists(world: World) -> None:
    """It named `dynaeval token`; the command is `dynaeval tokens create`."""
    import re

    from client.cli import build_parser

    page = _html(world.app.test_client().get("/login"))
    [command] = re.findall(r"<code>dynaeval ([^<]+)</code>", page)
    with pytest.raises(SystemExit) as ended:  # a real command prints its help and exits 0
        build_parser().parse_args([*command.split(), "--help"])
    assert ended.value.code == 0, command
