"""Freezing a collection round through the API: its validated examples (and only those)
become the round's versioned ``collected`` set, every scored model gets exactly one backfill
job, claimed after new submissions, and repeating the freeze or re-adding the same data
creates nothing."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from api.app import create_app
from configs.vocabulary.clock import ManualClock
from store.accounts import Accounts
from store.backfill import BACKFILL_PRIORITY
from store.models import CollectedExampleRow, CollectionRoundRow, JobRow
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import AXES_A, PROCESS, finished
from usecases.service import Service

TASK, ROUND = "sentiment", "r9"
FREEZE = f"/api/v1/tasks/{TASK}/rounds/{ROUND}/freeze"


@dataclass
class World:
    service: Service
    clock: ManualClock
    tokens: dict[str, str]
    models: list[str]
    users: dict[str, str]

    def client(self, who: str | None = None) -> FlaskClient:
        client = create_app(self.service).test_client()
        return signed_in(client, self.tokens[who]) if who else client


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    clock = ManualClock()
    service = Service.open(tmp_path / "data", clock=clock)
    tokens = {name: issue_token(service, name, "researcher") for name in ("owner", "writer")}
    tokens["admin"] = issue_token(service, "admin", "admin")
    accounts = Accounts(service.db, clock)
    accounts.set_task_access(TASK, "owner", private=False)
    users = {name: accounts.user_by_name(name)["id"] for name in ("owner", "writer")}
    models = [finished(service, f"scored-{i}", AXES_A, task=TASK) for i in range(2)]
    try:
        yield World(service, clock, tokens, models, users)
    finally:
        service.close()


def collect(world: World, verdicts: list[str | None], min_frozen: int | None = 1) -> None:
    """A collection round holding one fooled example per verdict (None: not settled), whose
    freeze needs ``min_frozen`` validated examples (None: the default)."""
    now = world.clock.now()
    settings = {} if min_frozen is None else {"min_frozen_examples": min_frozen}
    with world.service.db.session() as session, session.begin():
        session.add(
            CollectionRoundRow(
                task=TASK, round=ROUND, status="open", model_ids=world.models[:1],
                settings=settings, unhealthy={}, opened_by=world.users["owner"], opened_at=now,
            )
        )  # fmt: skip
        for index, verdict in enumerate(verdicts):
            session.add(
                CollectedExampleRow(
                    id=str(uuid.uuid4()), task=TASK, round=ROUND, origin="human",
                    author_id=world.users["writer"],
                    inputs={"statement": f"a written statement number {index}"},
                    intended={"label": "positive"}, model_id=world.models[0],
                    model_answer={"label": "negative"}, fooled=True, verdict=verdict,
                    created_at=now + timedelta(seconds=index),
                )
            )  # fmt: skip


def backfills(world: World) -> list[JobRow]:
    with world.service.db.session() as session:
        return list(session.scalars(select(JobRow).where(JobRow.priority == BACKFILL_PRIORITY)))


def test_freezing_makes_a_dataset_of_the_validated_examples_and_backfills_once(
    world: World,
) -> None:
    collect(world, ["correct", "incorrect", "flagged", None, "correct"])
    answer = world.client("owner").post(FREEZE)
    assert answer.status_code == 201, answer.get_data(as_text=True)
    body = answer.get_json()
    assert body["frozen_examples"] == 2 and body["created"] is True
    assert body["dataset"]["name"] == "collected" and body["dataset"]["examples"] == 2
    assert len(body["backfill_jobs"]) == 2  # one per scored model
    assert {job.model_id for job in backfills(world)} == set(world.models)

    rounds = world.client().get(f"/api/v1/tasks/{TASK}/rounds").get_json()["rounds"]
    [frozen] = [r for r in rounds if r["name"] == ROUND]
    assert frozen["datasets"][0]["sha256"] == body["dataset"]["sha256"]
    with world.service.db.session() as session:
        state = session.get(CollectionRoundRow, (TASK, ROUND))
        assert state is not None and state.status == "frozen"
        assert state.frozen_sha256 == body["dataset"]["sha256"]

    again = world.client("owner").post(FREEZE)
    assert again.status_code == 409 and again.get_json()["error"]["code"] == "round_frozen"
    assert len(backfills(world)) == 2  # nothing new


def test_the_same_data_added_again_creates_no_backfill(world: World) -> None:
    collect(world, ["correct"])
    first = world.client("owner").post(FREEZE).get_json()
    rows = [
        json.dumps({"uid": "x", "statement": "plain words here", "label": "positive",
                    "topic": "unspecified"})
    ]  # fmt: skip
    path = f"/api/v1/tasks/{TASK}/rounds/{ROUND}/datasets"
    body = {"dataset": "extra", "data": (io.BytesIO(("\n".join(rows) + "\n").encode()), "x.jsonl")}
    added = world.client("owner").post(path, data=body, content_type="multipart/form-data")
    assert added.status_code == 201, added.get_data(as_text=True)
    assert added.get_json()["backfill_jobs"] == []  # both models already wait for theirs
    body = {"dataset": "extra", "data": (io.BytesIO(("\n".join(rows) + "\n").encode()), "x.jsonl")}
    same = world.client("owner").post(path, data=body, content_type="multipart/form-data")
    assert same.status_code == 200 and same.get_json()["backfill_jobs"] == []
    assert len(backfills(world)) == len(first["backfill_jobs"]) == 2


def test_new_submissions_are_claimed_before_backfills(world: World) -> None:
    collect(world, ["correct"])
    world.client("owner").post(FREEZE)
    world.clock.advance(60)
    fresh, _ = world.service.store.submit(TASK, "fresh", PROCESS, owner_id=world.users["writer"])
    claimed = world.service.store.claim("w1", 60)
    assert claimed is not None and claimed.model_id == fresh  # though queued after them
    first_backfill = world.service.store.claim("w1", 60)
    assert first_backfill is not None and first_backfill.model_id in world.models


def test_only_the_owner_or_an_admin_freezes_and_only_validated_rounds(world: World) -> None:
    assert world.client().post(FREEZE).status_code == 401
    assert world.client("writer").post(FREEZE).status_code == 403
    unknown = world.client("owner").post(FREEZE)
    assert unknown.status_code == 404 and unknown.get_json()["error"]["code"] == "unknown_round"
    collect(world, [None, "incorrect"])
    empty = world.client("admin").post(FREEZE)
    assert empty.status_code == 409
    assert empty.get_json()["error"]["code"] == "nothing_validated"
    assert backfills(world) == []


def test_a_handful_of_validated_examples_is_too_few_to_freeze(world: World) -> None:
    """A 1-example set averaged equally with an 84-example test set turned the board over:
    a freeze needs the round's min_frozen_examples (default 20)."""
    collect(world, ["correct"] * 19 + ["incorrect"], min_frozen=None)
    refused = world.client("owner").post(FREEZE)
    assert refused.status_code == 409, refused.get_json()
    error = refused.get_json()["error"]
    assert error["code"] == "too_few_validated" and "at least 20" in error["message"]
    assert backfills(world) == []


def _frozen_rows(world: World, sha256: str) -> list[dict]:
    data = world.service.blobs.get_bytes(f"datasets/{sha256}.jsonl")
    return [json.loads(line) for line in data.decode().splitlines()]


def test_frozen_rows_keep_their_provenance_and_slices_as_written(world: World) -> None:
    collect(world, ["correct", "correct"])
    with world.service.db.session() as session, session.begin():
        first = session.scalars(
            select(CollectedExampleRow).order_by(CollectedExampleRow.created_at)
        ).first()
        assert first is not None
        first.slices, first.explanation = {"topic": "movies"}, "negation trips it"
    body = world.client("owner").post(FREEZE).get_json()
    rows = _frozen_rows(world, body["dataset"]["sha256"])
    assert [r["topic"] for r in rows] == ["movies", "unspecified"]  # as written, else said so
    provenance = rows[0]["provenance"]
    assert provenance["origin"] == "human" and provenance["author_id"] == world.users["writer"]
    assert provenance["model_id"] == world.models[0]
    assert provenance["model_answer"] == {"label": "negative"} and provenance["fooled"] is True
    assert provenance["explanation"] == "negation trips it" and provenance["verdict"] == "correct"


def test_a_writer_gives_slices_and_only_the_tasks_columns(world: World) -> None:
    collect(world, [])
    path = f"/api/v1/tasks/{TASK}/rounds/{ROUND}/examples"
    base = {"inputs": {"statement": "not bad at all, really"}, "label": "positive"}
    unknown = world.client("writer").post(path, json={**base, "slices": {"gender": "f"}})
    assert (
        unknown.status_code == 422
        and "unknown column 'gender'" in unknown.get_json()["error"]["message"]
    )
    long = world.client("writer").post(path, json={**base, "slices": {"topic": "x" * 101}})
    assert long.status_code == 422
    for odd in ("a\nb", "nul\u0000"):
        control = world.client("writer").post(path, json={**base, "slices": {"topic": odd}})
        assert control.status_code == 422 and "printable" in control.get_json()["error"]["message"]


def test_the_owner_exports_every_example_with_its_provenance(world: World) -> None:
    collect(world, ["correct", "incorrect", None])
    path = f"/api/v1/tasks/{TASK}/rounds/{ROUND}/examples/export"
    for who, code in ((None, 401), ("writer", 403)):
        refused = world.client(who).get(path)
        assert refused.status_code == code and refused.is_json
    answer = world.client("owner").get(path)
    assert answer.status_code == 200 and answer.mimetype == "application/x-ndjson"
    assert "attachment" in answer.headers["Content-Disposition"]
    rows = [json.loads(line) for line in answer.get_data(as_text=True).splitlines()]
    assert [r["provenance"]["verdict"] for r in rows] == ["correct", "incorrect", None]
    assert all(r["slices"] == {"topic": "unspecified"} for r in rows)
    assert rows[0]["intended"] == {"label": "positive"} and "statement" in rows[0]
    missing = world.client("owner").get(f"/api/v1/tasks/{TASK}/rounds/r404/examples/export")
    assert missing.status_code == 404
