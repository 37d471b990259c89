"""Validation through the API with real users: an author, two validators and the task's
owner (plus an outsider and an admin). Collected examples are inserted as ORM rows (the
collection API is written elsewhere). Concurrent votes settle an example exactly once on
SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select

from api.app import create_app
from configs.vocabulary.clock import ManualClock
from metrics.vmer import CollectedOutcome
from store.accounts import Accounts
from store.db import Database
from store.models import CollectedExampleRow, CollectionRoundRow, ValidationVoteRow
from store.validation import Validation, ValidationRefused
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import assert_error
from tests.unit.test_vmer import OUTCOMES
from usecases.service import Service

ROUND = "r9"
USERS = ("author", "val1", "val2", "owner", "outsider")


@dataclasses.dataclass
class World:
    app: Flask
    service: Service
    tokens: dict[str, str]
    ids: dict[str, str]  # user name -> user id

    def client(self, user: str) -> FlaskClient:
        client = self.app.test_client()
        return client if user == "anonymous" else signed_in(client, self.tokens[user])


def open_round(db: Database, task: str, votes_needed: int = 2, status: str = "open") -> None:
    with db.session() as session, session.begin():
        session.add(
            CollectionRoundRow(
                task=task, round=ROUND, status=status, model_ids=["A", "B"],
                settings={"votes_needed": votes_needed}, unhealthy={}, opened_by=None,
                opened_at=ManualClock().now(), frozen_at=None, frozen_sha256=None,
            )
        )  # fmt: skip


def add_example(db: Database, task: str, author_id: str | None, **columns: Any) -> str:
    """A collected example (a human one that fooled model A, unless told otherwise)."""
    example_id = columns.pop("id", None) or str(uuid.uuid4())
    row = {
        "origin": "human" if author_id else "machine",
        "inputs": {"text": "a film I would not watch twice, or once"},
        "intended": {"label": "negative"},
        "explanation": None,
        "model_id": "A",
        "model_answer": {"label": "positive"},
        "fooled": True,
        "answer_error": None,
        "fooled_models": None,
        "source_uid": None,
        "verdict": None,
        "settled_by": None,
        "settled_at": None,
        "created_at": ManualClock().now() + timedelta(seconds=_counter()),
    }
    row.update(columns)
    with db.session() as session, session.begin():
        session.add(
            CollectedExampleRow(id=example_id, task=task, round=ROUND, author_id=author_id, **row)
        )
    return example_id


_COUNT = [0]


def _counter() -> int:
    _COUNT[0] += 1
    return _COUNT[0]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    service = Service.open(tmp_path / "data")
    tokens = {name: issue_token(service, name, "researcher") for name in USERS}
    tokens["admin"] = issue_token(service, "admin", "admin")
    tokens["author_read"] = issue_token(service, "author", scopes=["read"])
    accounts = Accounts(service.db)
    ids = {name: accounts.user_by_name(name)["id"] for name in (*USERS, "admin")}
    accounts.set_task_access("sentiment", "owner", private=False)
    accounts.set_task_access("qa", "owner", private=True)
    open_round(service.db, "sentiment")
    open_round(service.db, "qa")
    yield World(create_app(service), service, tokens, ids)
    service.close()


def vote(world: World, user: str, example_id: str, verdict: str) -> Any:
    return world.client(user).post(
        f"/api/v1/examples/{example_id}/votes", json={"verdict": verdict}
    )


def queue(world: World, user: str, task: str = "sentiment") -> list[str]:
    answer = world.client(user).get(f"/api/v1/tasks/{task}/rounds/{ROUND}/validation")
    assert answer.status_code == 200, answer.get_json()
    return [e["id"] for e in answer.get_json()["examples"]]


# -- voting ----------------------------------------------------------------------------------
def test_two_matching_votes_settle_and_the_author_cannot_vote(world: World) -> None:
    example = add_example(world.service.db, "sentiment", world.ids["author"])
    assert example in queue(world, "val1") and example not in queue(world, "author")
    shown = world.client("val1").get(f"/api/v1/tasks/sentiment/rounds/{ROUND}/validation")
    first = shown.get_json()["examples"][0]
    assert first["intended"] == {"label": "negative"} and first["model_answer"]["label"]
    assert "author_id" not in first

    assert_error(vote(world, "author", example, "correct"), 403, "own_example")
    one = vote(world, "val1", example, "correct")
    assert one.status_code == 201, one.get_json()
    assert one.get_json()["settled"] is False and one.get_json()["votes"]["correct"] == 1
    assert example not in queue(world, "val1")  # voted: out of their queue
    assert_error(vote(world, "val1", example, "incorrect"), 409, "already_voted")

    two = vote(world, "val2", example, "correct").get_json()
    assert two["settled"] is True and two["verdict"] == "correct" and two["settled_by"] == "votes"
    assert example not in queue(world, "outsider")  # settled: out of every queue
    assert_error(vote(world, "outsider", example, "correct"), 409, "already_settled")
    votes = world.client("author").get(f"/api/v1/examples/{example}/votes").get_json()["votes"]
    assert [(v["voter"], v["verdict"]) for v in votes] == [("val1", "correct"), ("val2", "correct")]


def test_a_conflicting_vote_does_not_settle_and_the_owner_settles_directly(world: World) -> None:
    example = add_example(world.service.db, "sentiment", world.ids["author"])
    vote(world, "val1", example, "correct")
    split = vote(world, "val2", example, "flagged").get_json()
    assert split["settled"] is False and split["votes"] == {
        "correct": 1,
        "incorrect": 0,
        "flagged": 1,
    }
    assert_error(
        world.client("val1").post(
            f"/api/v1/examples/{example}/settle", json={"verdict": "correct"}
        ),
        403,
        "not_task_owner",
    )
    settled = world.client("owner").post(
        f"/api/v1/examples/{example}/settle", json={"verdict": "incorrect"}
    )
    assert settled.status_code == 200, settled.get_json()
    body = settled.get_json()
    assert body["verdict"] == "incorrect" and body["settled_by"] == world.ids["owner"]
    assert_error(vote(world, "outsider", example, "correct"), 409, "already_settled")
    again = world.client("admin").post(
        f"/api/v1/examples/{example}/settle", json={"verdict": "correct"}
    )
    assert_error(again, 409, "already_settled")
    with world.service.db.session() as session:
        assert session.scalar(select(func.count()).select_from(ValidationVoteRow)) == 2


def test_two_flags_settle_as_flagged_and_machine_proposals_are_queued(world: World) -> None:
    proposal = add_example(world.service.db, "sentiment", None, fooled_models=["A", "B"])
    not_fooled = add_example(world.service.db, "sentiment", world.ids["author"], fooled=False)
    assert proposal in queue(world, "author") and not_fooled not in queue(world, "val1")
    assert_error(vote(world, "val1", not_fooled, "correct"), 409, "not_for_validation")
    vote(world, "author", proposal, "flagged")
    assert vote(world, "val1", proposal, "flagged").get_json()["verdict"] == "flagged"


def test_the_queue_is_oldest_first_and_limited(world: World) -> None:
    made = [add_example(world.service.db, "sentiment", world.ids["author"]) for _ in range(3)]
    assert queue(world, "val1") == made
    limited = world.client("val1").get(f"/api/v1/tasks/sentiment/rounds/{ROUND}/validation?limit=2")
    assert [e["id"] for e in limited.get_json()["examples"]] == made[:2]
    bad = world.client("val1").get(f"/api/v1/tasks/sentiment/rounds/{ROUND}/validation?limit=0")
    assert_error(bad, 422)


def test_bad_verdicts_and_frozen_rounds_are_refused(world: World) -> None:
    example = add_example(world.service.db, "sentiment", world.ids["author"])
    assert_error(vote(world, "val1", example, "maybe"), 422)
    with world.service.db.session() as session, session.begin():
        session.get(CollectionRoundRow, ("sentiment", ROUND)).status = "frozen"  # type: ignore[union-attr]
    assert_error(vote(world, "val1", example, "correct"), 409, "round_frozen")
    assert queue(world, "val1") == []


# -- who may do what -------------------------------------------------------------------------
def test_roles_and_guessed_ids(world: World) -> None:
    public = add_example(world.service.db, "sentiment", world.ids["author"])
    private = add_example(world.service.db, "qa", world.ids["author"])
    guessed = str(uuid.uuid4())
    votes = "/api/v1/examples/{}/votes"
    # anonymous: 401 on every signed-in route
    for path in (votes.format(public), f"/api/v1/tasks/sentiment/rounds/{ROUND}/validation"):
        assert_error(world.client("anonymous").get(path), 401)
    assert_error(
        world.client("anonymous").post(votes.format(public), json={"verdict": "correct"}), 401
    )
    # read-only token: no votes
    assert_error(
        world.client("author_read").post(votes.format(public), json={"verdict": "correct"}), 403
    )
    # guessed ids and a private task's examples: 404 to outsiders
    for user, example in (("val1", guessed), ("val1", private), ("admin", guessed)):
        assert_error(vote(world, user, example, "correct"), 404, "unknown_example")
        assert_error(world.client(user).get(votes.format(example)), 404, "unknown_example")
    assert_error(
        world.client("val1").get(f"/api/v1/tasks/qa/rounds/{ROUND}/validation"), 404, "unknown_task"
    )
    assert_error(
        world.client("anonymous").get(f"/api/v1/tasks/qa/rounds/{ROUND}/vmer"), 404, "unknown_task"
    )
    assert_error(
        world.client("val1").get("/api/v1/tasks/sentiment/rounds/nope/vmer"), 404, "unknown_round"
    )
    # the votes of an example: its author, the owner and admins; 404 to other validators
    for user, status in (("author", 200), ("owner", 200), ("admin", 200), ("val1", 404)):
        assert world.client(user).get(votes.format(public)).status_code == status, user
    # the private task's owner validates there
    assert vote(world, "owner", private, "correct").status_code == 201
    assert world.client("owner").get(f"/api/v1/tasks/qa/rounds/{ROUND}/vmer").status_code == 200


# -- vMER ------------------------------------------------------------------------------------
def _insert_outcomes(world: World, outcomes: list[CollectedOutcome]) -> None:
    writers = {"w1": world.ids["author"], "w2": world.ids["val1"], "w3": world.ids["val2"]}
    seen: dict[str, list[str]] = {}
    for outcome in outcomes:
        seen.setdefault(outcome.example_id, []).append(outcome.model_id or "")
    for outcome in outcomes:
        models = seen.pop(outcome.example_id, None)
        if models is None:
            continue  # a machine proposal's second model: one row fooling both
        machine = outcome.origin == "machine"
        add_example(
            world.service.db, "sentiment",
            writers[outcome.author_id] if outcome.author_id else None,
            model_id=outcome.model_id, fooled=outcome.fooled, verdict=outcome.verdict,
            fooled_models=models if machine else None,
            model_answer=None if outcome.fooled is None else {"label": "positive"},
        )  # fmt: skip


def test_vmer_through_the_api_is_the_hand_computed_case(world: World) -> None:
    """The case of tests/unit/test_vmer.py (its docstring has the arithmetic): writers w1,
    w2, w3 are the users author, val1, val2."""
    _insert_outcomes(world, OUTCOMES)
    answer = world.client("anonymous").get(f"/api/v1/tasks/sentiment/rounds/{ROUND}/vmer")
    assert answer.status_code == 200, answer.get_json()
    body = answer.get_json()
    totals = {t["origin"]: t for t in body["totals"]}
    assert totals["human"]["submitted"] == 10 and totals["human"]["vmer"] == pytest.approx(4 / 9)
    assert totals["human"]["unvalidated_fooled"] == 1 and totals["human"]["unanswered"] == 1
    assert totals["machine"]["vmer"] == pytest.approx(0.5)
    models = {(m["origin"], m["model_id"]): m["vmer"] for m in body["models"]}
    assert models == pytest.approx(
        {("human", "A"): 0.6, ("human", "B"): 0.25, ("machine", "A"): 0.5, ("machine", "B"): 1.0}
    )
    writers = [(w["origin"], w["writer"], w["vmer"]) for w in body["writers"]]
    assert writers == [
        ("human", "val2", pytest.approx(2 / 3)), ("human", "val1", pytest.approx(1 / 2)),
        ("human", "author", 0.25), ("machine", None, 0.5),
    ]  # fmt: skip
    assert "inputs" not in answer.get_data(as_text=True)  # aggregates only, never example text


# -- concurrency -----------------------------------------------------------------------------
def test_concurrent_votes_settle_exactly_once(database_url: str) -> None:
    """8 validators vote at once on one example needing 2 matching votes: two votes are
    kept, one of them settles it, the other six are refused as settled (SQLite and
    PostgreSQL)."""
    db = Database(database_url)
    try:
        accounts = Accounts(db)
        voters = [accounts.add_user(f"v{n}", "researcher")["id"] for n in range(8)]
        author = accounts.add_user("writer", "researcher")["id"]
        open_round(db, "sentiment")
        example = add_example(db, "sentiment", author)
        store = Validation(db, ManualClock())
        barrier = threading.Barrier(len(voters))
        results: list[Any] = [None] * len(voters)

        def cast(index: int) -> None:
            barrier.wait()
            try:
                results[index] = store.vote(example, voters[index], "correct")
            except ValidationRefused as exc:
                results[index] = exc.code

        threads = [threading.Thread(target=cast, args=(n,)) for n in range(len(voters))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        settled = [r for r in results if not isinstance(r, str) and r.verdict is not None]
        assert len(settled) == 1, results
        assert sorted(r for r in results if isinstance(r, str)) == ["already_settled"] * 6
        with db.session() as session:
            assert session.scalar(select(func.count()).select_from(ValidationVoteRow)) == 2
            row = session.get(CollectedExampleRow, example)
            assert row is not None and (row.verdict, row.settled_by) == ("correct", "votes")
    finally:
        db.dispose()


@pytest.mark.parametrize("settler", ["owner", "admin"])
def test_no_one_settles_their_own_example_not_even_the_owner(world: World, settler: str) -> None:
    """The owner settled their own example with no votes and froze it: a 1-example set."""
    example = add_example(world.service.db, "sentiment", world.ids[settler])
    own = world.client(settler).post(
        f"/api/v1/examples/{example}/settle", json={"verdict": "correct"}
    )
    assert_error(own, 403, "own_example")
    assert_error(vote(world, settler, example, "correct"), 403)  # nor vote on it
