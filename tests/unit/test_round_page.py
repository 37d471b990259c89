"""The collection round's page: status, a real vMER table per model and per writer
(machine proposals and unvalidated examples apart), and the validation form for a
signed-in user, under the same Origin rule as every page form."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from api.app import create_app
from api.auth import SESSION_COOKIE
from store.accounts import ROLE_SCOPES, SESSION, Accounts
from tests.unit.test_validation_api import ROUND, add_example, open_round
from usecases.service import Service

OURS = {"Origin": "http://localhost"}
PAGE = f"/tasks/sentiment/rounds/{ROUND}"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Flask]:
    service = Service.open(tmp_path / "data")
    accounts = Accounts(service.db)
    for name in ("author", "val1", "owner"):
        accounts.add_user(name, "researcher")
    accounts.set_task_access("sentiment", "owner", private=False)
    accounts.set_task_access("qa", "owner", private=True)
    open_round(service.db, "sentiment")
    open_round(service.db, "qa")
    yield create_app(service)
    service.close()


def browser(app: Flask, name: str | None = None) -> FlaskClient:
    """A browser, signed in as ``name`` with a session cookie when given."""
    client = app.test_client()
    if name is not None:
        accounts = Accounts(app.extensions["dynaeval"].db)
        user = accounts.user_by_name(name)
        assert user is not None
        scopes = sorted(ROLE_SCOPES[user["role"]])
        issued = accounts.create_token(user["id"], "login", scopes, kind=SESSION)
        client.set_cookie(SESSION_COOKIE, issued.secret)
    return client


def _user(app: Flask, name: str) -> str:
    found = Accounts(app.extensions["dynaeval"].db).user_by_name(name)
    assert found is not None
    return str(found["id"])


def _row(html: str, table: str, key: str) -> list[str]:
    """The cells of the row whose data attribute is ``key`` in table ``table``."""
    section = html.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    row = re.search(rf'data-[a-z]+="{re.escape(key)}">(.*?)</tr>', section, re.S)
    assert row is not None, section
    return [
        re.sub(r"<[^>]+>", "", c).strip()
        for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row.group(1), re.S)
    ]


def test_the_page_shows_status_and_the_vmer_tables(app: Flask) -> None:
    db = app.extensions["dynaeval"].db
    author = _user(app, "author")
    add_example(db, "sentiment", author, verdict="correct", settled_by="votes")
    add_example(db, "sentiment", author)  # fooled, awaiting validation
    add_example(db, "sentiment", author, fooled=False, model_id="B")
    add_example(db, "sentiment", None, fooled_models=["A"], verdict="incorrect")
    page = browser(app).get(PAGE)
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'id="status">open<' in html
    # columns: name, submitted, fooled, validated, rejected, awaiting, unanswered, vMER
    assert _row(html, "vmer-totals", "human") == ["people", "3", "2", "1", "0", "1", "0", "33.3 %"]
    assert _row(html, "vmer-models-human", "A") == ["A", "2", "2", "1", "0", "1", "0", "50.0 %"]
    assert _row(html, "vmer-models-human", "B")[-1] == "0.0 %"
    assert _row(html, "vmer-models-machine", "A")[1:] == ["1", "1", "0", "1", "0", "0", "0.0 %"]
    assert _row(html, "vmer-writers", "author")[1] == "3"
    assert "a film I would not watch" not in html  # anonymous: aggregates only
    assert "Sign in" in html and 'id="validate"' not in html


def test_a_signed_in_validator_votes_with_the_form(app: Flask) -> None:
    db = app.extensions["dynaeval"].db
    example = add_example(db, "sentiment", _user(app, "author"))
    client = browser(app, "val1")
    html = client.get(PAGE).get_data(as_text=True)
    assert f'name="example_id" value="{example}"' in html and "a film I would not watch" in html
    assert 'id="queue-empty"' in browser(app, "author").get(PAGE).get_data(as_text=True)

    foreign = client.post(
        f"{PAGE}/votes", data={"example_id": example, "verdict": "correct"},
        headers={"Origin": "https://evil.example"},
    )  # fmt: skip
    assert foreign.status_code == 403 and foreign.mimetype == "text/html"
    voted = client.post(
        f"{PAGE}/votes", data={"example_id": example, "verdict": "correct"}, headers=OURS
    )
    assert voted.status_code == 303 and "voted=correct" in voted.headers["Location"]
    after = client.get(voted.headers["Location"]).get_data(as_text=True)
    assert 'id="voted"' in after and 'id="queue-empty"' in after
    again = client.post(
        f"{PAGE}/votes", data={"example_id": example, "verdict": "flagged"}, headers=OURS
    )
    assert again.status_code == 409 and "voted on this example already" in again.get_data(
        as_text=True
    )


def test_hidden_and_unknown_rounds_are_not_found(app: Flask) -> None:
    assert browser(app).get(f"/tasks/qa/rounds/{ROUND}").status_code == 404
    assert browser(app, "owner").get(f"/tasks/qa/rounds/{ROUND}").status_code == 200
    assert browser(app).get("/tasks/sentiment/rounds/nope").status_code == 404
    signed_out = browser(app).post(
        f"{PAGE}/votes", data={"example_id": "x", "verdict": "correct"}, headers=OURS
    )
    assert signed_out.status_code == 401 and "Sign in first" in signed_out.get_data(as_text=True)
    guessed = browser(app, "val1").post(
        f"{PAGE}/votes", data={"example_id": "x", "verdict": "correct"}, headers=OURS
    )
    assert guessed.status_code == 404 and guessed.mimetype == "text/html"
