"""Collection through the API with real users and SQLite: opening a round (by role),
writing examples against a fake live pool (which records what it is sent: never the
intended output), bad input storing nothing, a failing model kept unanswered and marked
unhealthy, the per-round rate limit, closed rounds and who sees the written examples."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select

from api.app import create_app
from configs.schema import TaskSpec
from configs.vocabulary.clock import ManualClock
from configs.vocabulary.examples import Prediction
from evaluator.collection import LiveModel, LiveModelError
from store.accounts import Accounts
from store.models import CollectedExampleRow
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import AXES_A, assert_error, finished
from usecases.service import Service

ROUND = "c1"
USERS = ("writer", "other", "owner", "outsider")
TEXT = {"statement": "not the worst film, which says a lot"}


class FakePool:
    """A LivePool stand-in: answers from a table, fails for the ids in ``failing``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.failing: set[str] = set()
        self.output = "positive"
        self.stopped: list[str] = []

    def answer(self, model: LiveModel, task: TaskSpec, inputs: Mapping[str, Any]) -> Prediction:
        self.calls.append((model.model_id, dict(inputs)))
        if model.model_id in self.failing:
            raise LiveModelError("crashed", "the model exited with code 1")
        return Prediction(uid="live", output=self.output)

    def stop_idle(self) -> int:
        return 0

    def stop_models(self, model_ids: Any) -> list[str]:
        self.stopped.extend(model_ids)
        return list(model_ids)

    def close(self) -> None:
        pass


@dataclasses.dataclass
class World:
    app: Flask
    service: Service
    tokens: dict[str, str]
    models: dict[str, str]  # task -> [model ids]
    pool: FakePool

    def client(self, user: str) -> FlaskClient:
        client = self.app.test_client()
        return client if user == "anonymous" else signed_in(client, self.tokens[user])


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    service = Service.open(tmp_path / "data", clock=ManualClock())
    tokens = {name: issue_token(service, name, "researcher") for name in USERS}
    tokens["admin"] = issue_token(service, "admin", "admin")
    tokens["reader"] = issue_token(service, "writer", scopes=["read"])
    accounts = Accounts(service.db)
    accounts.set_task_access("sentiment", "owner", private=False)
    accounts.set_task_access("qa", "owner", private=True)
    models = {
        "a": finished(service, "a", AXES_A),
        "b": finished(service, "b", AXES_A),
        "qa": finished(service, "q", AXES_A, task="qa"),
        "unscored": service.store.submit("sentiment", "u", {"kind": "url", "url": "http://x"})[0],
    }
    pool = FakePool()
    service.live = pool  # type: ignore[assignment]
    yield World(create_app(service), service, tokens, models, pool)
    service.close()


def one_task_world(tmp_path: Path, task: str, model: str) -> Iterator[World]:
    """A public ``task`` owned by "owner", a "writer", and one scored model called ``model``
    in the loop's pool (for the fixtures of the other output types' loop tests)."""
    service = Service.open(tmp_path / "data", clock=ManualClock())
    tokens = {name: issue_token(service, name, "researcher") for name in ("writer", "owner")}
    Accounts(service.db).set_task_access(task, "owner", private=False)
    models = {model: finished(service, model, AXES_A, task=task)}
    pool = FakePool()
    service.live = pool  # type: ignore[assignment]
    yield World(create_app(service), service, tokens, models, pool)
    service.close()


def url(task: str = "sentiment", tail: str = "collection") -> str:
    return f"/api/v1/tasks/{task}/rounds/{ROUND}/{tail}"


def open_round(world: World, task: str = "sentiment", **settings: Any) -> None:
    ids = [world.models["qa"]] if task == "qa" else [world.models["a"], world.models["b"]]
    answer = world.client("owner").post(url(task), json={"model_ids": ids, "settings": settings})
    assert answer.status_code == 201, answer.get_json()


def write(world: World, user: str = "writer", task: str = "sentiment", **body: Any) -> Any:
    body.setdefault("inputs", TEXT)
    if task == "sentiment":
        body.setdefault("label", "negative")
    return world.client(user).post(url(task, "examples"), json=body)


def stored(world: World) -> int:
    with world.service.db.session() as session:
        return int(session.scalar(select(func.count()).select_from(CollectedExampleRow)) or 0)


# -- opening ---------------------------------------------------------------------------------
def test_opening_by_role(world: World) -> None:
    body = {"model_ids": [world.models["a"]]}
    assert_error(world.client("anonymous").post(url(), json=body), 401)
    assert_error(world.client("other").post(url(), json=body), 403, "not_task_owner")
    assert_error(world.client("outsider").post(url("qa"), json=body), 404, "unknown_task")
    answer = world.client("owner").post(url(), json=body)
    assert answer.status_code == 201
    shown = answer.get_json()
    assert shown["status"] == "open" and shown["settings"]["votes_needed"] == 2
    assert (
        shown["settings"]["qa_f1_threshold"] == 0.4 and shown["settings"]["writes_per_hour"] == 60
    )
    assert shown["models"] == [
        {"id": world.models["a"], "name": "a", "healthy": True, "reason": None}
    ]
    assert_error(world.client("owner").post(url(), json=body), 409, "collection_open")
    qa = world.client("admin").post(url("qa"), json={"model_ids": [world.models["qa"]]})
    assert qa.status_code == 201
    # public view of a visible task; the private one stays hidden
    assert world.client("anonymous").get(url()).get_json()["counts"]["written"] == 0
    assert_error(world.client("outsider").get(url("qa")), 404, "unknown_task")


@pytest.mark.parametrize("which", ["unscored", "qa", "nope"])
def test_opening_with_a_bad_model_names_it(world: World, which: str) -> None:
    bad = world.models.get(which, which)
    answer = world.client("owner").post(url(), json={"model_ids": [world.models["a"], bad]})
    assert bad in assert_error(answer, 422, "invalid_models")["message"]
    assert_error(world.client("anonymous").get(url()), 404, "unknown_round")


# -- writing ---------------------------------------------------------------------------------
def test_a_write_is_answered_and_the_model_never_sees_the_label(world: World) -> None:
    open_round(world)
    answer = write(world, explanation="sarcasm")
    assert answer.status_code == 201, answer.get_json()
    body = answer.get_json()
    assert body["fooled"] is True and body["unanswered"] is False
    assert (
        body["model_answer"] == {"label": "positive"} and body["message"] == "You fooled the model."
    )
    assert world.pool.calls == [(world.models["a"], TEXT)]
    world.pool.output = "negative"
    second = write(world).get_json()  # least used: the other model
    assert second["model_id"] == world.models["b"] and second["fooled"] is False
    assert second["message"] == "The model got it right."
    assert all("negative" not in str(sent) for _, sent in world.pool.calls)
    counts = world.client("anonymous").get(url()).get_json()["counts"]
    assert counts == {"written": 2, "fooled": 1, "unanswered": 0}


def test_qa_answers_are_spans_and_fooled_by_f1(world: World) -> None:
    open_round(world, "qa")
    context = "The bridge opened in 1932 after six years of work."
    inputs = {"context": context, "question": "When did the bridge open?"}
    world.pool.output = "six years"
    bad = write(world, "owner", task="qa", inputs=inputs, answer="1932", answer_start=3)
    assert_error(bad, 422, "invalid_example")
    good = write(
        world, "owner", task="qa", inputs=inputs, answer="1932", answer_start=context.index("1932")
    )
    assert good.status_code == 201 and good.get_json()["fooled"] is True
    assert world.pool.calls == [(world.models["qa"], inputs)]


@pytest.mark.parametrize(
    "body",
    [
        {"inputs": {}},
        {"inputs": {**TEXT, "extra": "x"}},
        {"inputs": {"statement": ""}},
        {"inputs": {"statement": "x" * 51}},
        {"label": "furious"},
        {"label": None},
        {"inputs": {"statement": 3}},
        {"model_id": "not-in-the-loop"},
        {"answer": "great", "answer_start": 0},  # a QA answer on a label task was dropped
        {"answer": "great"},
    ],
)
def test_bad_examples_are_422_and_store_nothing(world: World, body: dict[str, Any]) -> None:
    open_round(world, max_field_chars=50)
    answer = write(world, **body)
    assert_error(answer, 422)
    assert stored(world) == 0 and world.pool.calls == []


def test_a_crashed_model_keeps_the_example_unanswered_and_is_skipped(world: World) -> None:
    open_round(world)
    a, b = world.models["a"], world.models["b"]
    world.pool.failing = {a}
    answer = write(world, model_id=a).get_json()
    assert answer["unanswered"] is True and answer["fooled"] is None and answer["model_id"] == a
    assert "could not answer" in answer["message"] and "crashed" in answer["message"]
    shown = world.client("anonymous").get(url()).get_json()
    assert shown["models"][0]["healthy"] is False and "exited" in shown["models"][0]["reason"]
    assert shown["counts"]["unanswered"] == 1
    assert write(world, model_id=a).get_json()["model_id"] == b  # the healthy one answers
    world.pool.failing = {b}
    write(world)
    last = write(world).get_json()  # none healthy: kept, unanswered, not sent anywhere
    assert last["unanswered"] is True and last["model_id"] is None
    assert "no in-the-loop model" in last["message"] and stored(world) == 4
    # the owner resets health by closing and reopening
    world.client("owner").post(url(tail="collection/close"))
    world.pool.failing = set()
    open_round(world)
    assert write(world).get_json()["fooled"] is True


def test_rate_limit_per_writer_and_round(world: World) -> None:
    open_round(world, writes_per_hour=2)
    assert write(world).status_code == write(world).status_code == 201
    limited = write(world)
    assert_error(limited, 429, "rate_limited")
    assert int(limited.headers["Retry-After"]) > 0 and stored(world) == 2
    assert write(world, user="other").status_code == 201  # another writer's own bucket


def test_closed_and_unknown_rounds_refuse_writes(world: World) -> None:
    assert_error(write(world), 404, "unknown_round")
    open_round(world)
    assert_error(world.client("other").post(url(tail="collection/close")), 403)
    closed = world.client("owner").post(url(tail="collection/close"))
    assert closed.status_code == 200 and closed.get_json()["status"] == "closed"
    assert world.pool.stopped == [world.models["a"], world.models["b"]]  # its live models
    assert_error(write(world), 409, "round_not_open")
    assert_error(world.client("owner").post(url(tail="collection/close")), 409, "round_not_open")
    assert_error(write(world, user="reader"), 403, "insufficient_scope")
    assert_error(write(world, user="outsider", task="qa"), 404, "unknown_task")
    assert stored(world) == 0


def test_closing_keeps_a_model_another_open_round_still_uses(world: World) -> None:
    open_round(world)
    shared = {"model_ids": [world.models["a"]]}
    other = world.client("owner").post(url().replace(f"/{ROUND}/", "/c2/"), json=shared)
    assert other.status_code == 201, other.get_json()
    assert world.client("owner").post(url(tail="collection/close")).status_code == 200
    assert world.pool.stopped == [world.models["b"]]  # "a" still answers writers of c2


def test_written_examples_are_seen_by_their_author_and_the_owners_only(world: World) -> None:
    open_round(world)
    mine = write(world).get_json()["id"]
    theirs = write(world, user="other").get_json()["id"]

    def listed(user: str, query: str = "") -> list[str]:
        answer = world.client(user).get(url(tail="examples") + query)
        assert answer.status_code == 200, answer.get_json()
        return [e["id"] for e in answer.get_json()["examples"]]

    assert listed("writer") == [mine] and listed("other") == [theirs]
    assert listed("anonymous") == [] and listed("outsider") == []
    assert set(listed("owner")) == {mine, theirs} and set(listed("admin")) == {mine, theirs}
    assert listed("owner", "?mine=true") == []
    shown = world.client("writer").get(url(tail="examples")).get_json()["examples"][0]
    assert shown["intended"] == {"label": "negative"} and shown["inputs"] == TEXT


# -- the page (a plain form, no script) ------------------------------------------------------
def test_the_page_writes_through_the_same_path(world: World) -> None:
    open_round(world)
    page = f"/tasks/sentiment/rounds/{ROUND}/collect"
    anonymous = world.client("anonymous").get(page).get_data(as_text=True)
    assert "collect-sign-in" in anonymous and 'id="collect"' not in anonymous
    assert world.client("anonymous").post(page, data={"label": "negative"}).status_code == 401
    form = {"input_statement": TEXT["statement"], "label": "negative", "explanation": "irony"}
    written = world.client("writer").post(page, data=form)
    assert written.status_code == 201 and "You fooled the model" in written.get_data(as_text=True)
    bad = world.client("writer").post(page, data={**form, "label": "furious"})
    assert bad.status_code == 422 and "not in" in bad.get_data(as_text=True)
    world.pool.failing = {world.models["b"]}
    failed = world.client("writer").post(page, data=form).get_data(as_text=True)
    assert "The model could not answer" in failed and stored(world) == 2
    assert world.client("outsider").get(f"/tasks/qa/rounds/{ROUND}/collect").status_code == 404


# -- a real live pool with a process model ---------------------------------------------------
def test_a_real_live_pool_answers_with_a_process_model(world: World) -> None:
    from evaluator.collection import LivePool
    from store.models import ModelRow
    from usecases.service import example_catalog, example_runtime

    entry = next(e for e in example_catalog() if e["name"] == "sentiment-lexicon")
    with world.service.db.session() as session, session.begin():
        row = session.get(ModelRow, world.models["a"])
        assert row is not None
        row.runtime = example_runtime(entry, "process")
    pool = LivePool(world.service.blobs, clock=world.service.clock, timeout_s=30.0)
    world.service.live = pool
    world.client("owner").post(url(), json={"model_ids": [world.models["a"]]})
    answer = write(world, inputs={"statement": "a wonderful, moving, brilliant film"})
    body = answer.get_json()
    assert answer.status_code == 201, body
    assert body["unanswered"] is False and body["model_answer"]["label"] in (
        "positive",
        "negative",
        "neutral",
    )
    assert body["fooled"] == (body["model_answer"]["label"] != "negative")
    assert pool.warm() == [world.models["a"]]


def test_a_dead_model_is_restarted_on_its_own_and_unanswered_examples_leave_the_rates(
    world: World,
) -> None:
    """A dead in-the-loop model blocked its round: every later write was 201 unanswered
    until the owner closed and reopened it. It is now tried again a minute later."""
    open_round(world)
    a, b = world.models["a"], world.models["b"]
    world.pool.failing = {a, b}
    write(world, model_id=a)
    dead = write(world, model_id=b).get_json()
    assert dead["unanswered"] is True and "restart" in dead["message"]
    world.pool.failing = set()  # the models would answer again once started anew
    waiting = write(world).get_json()
    assert waiting["unanswered"] is True and waiting["model_id"] is None  # inside the minute
    world.service.clock.advance(61)  # type: ignore[attr-defined]
    back = write(world).get_json()
    assert back["unanswered"] is False and back["model_id"] in (a, b), back
    shown = world.client("anonymous").get(url()).get_json()
    assert [m["healthy"] for m in shown["models"] if m["id"] == back["model_id"]] == [True]
    vmer = world.client("anonymous").get(url(tail="vmer")).get_json()
    human = {t["origin"]: t for t in vmer["totals"]}["human"]
    assert (human["submitted"], human["unanswered"]) == (4, 3)
    assert human["mer"] == 1.0  # 1 fooled of the 1 answered: the 3 unanswered stay out
