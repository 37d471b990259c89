"""The dynamic loop end to end through the API, with three users beside the task's owner:
a writer fools the live model, two validators settle what was written, the owner freezes
the round into a dataset, and the worker backfills every scored model on it, once."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from api.app import create_app
from configs.vocabulary.clock import ManualClock
from store.accounts import Accounts
from store.models import ScoreRow
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import AXES_A, AXES_B
from tests.unit.test_collection_api import FakePool
from tests.unit.test_rounds_api import scored_now
from tests.unit.test_task_catalog import small_config
from tests.unit.test_worker import FakeModel, FakeRuntime, factory_of
from usecases.service import Service
from worker.worker import Worker

ROUND = "c1"
LOOP = f"/api/v1/tasks/sentiment/rounds/{ROUND}"
USERS = ("owner", "writer", "val1", "val2")


@dataclass
class Loop:
    service: Service
    tokens: dict[str, str]
    models: list[str]
    pool: FakePool

    def client(self, user: str) -> FlaskClient:
        return signed_in(create_app(self.service).test_client(), self.tokens[user])

    def write(self, statement: str, label: str) -> dict[str, Any]:
        body = {"inputs": {"statement": statement}, "label": label}
        answer = self.client("writer").post(f"{LOOP}/examples", json=body)
        assert answer.status_code == 201, answer.get_json()
        return dict(answer.get_json())

    def vote(self, user: str, example_id: str, verdict: str) -> int:
        body = {"verdict": verdict}
        return self.client(user).post(f"/api/v1/examples/{example_id}/votes", json=body).status_code


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[Loop]:
    config_dir = small_config(tmp_path / "configs")
    service = Service.open(tmp_path / "data", config_dir=config_dir, clock=ManualClock())
    tokens = {name: issue_token(service, name, "researcher") for name in USERS}
    Accounts(service.db, service.clock).set_task_access("sentiment", "owner", private=False)
    models = [scored_now(service, "first", AXES_A), scored_now(service, "second", AXES_B)]
    pool = FakePool()
    service.live = pool  # type: ignore[assignment]
    try:
        yield Loop(service, tokens, models, pool)
    finally:
        service.close()


def test_collect_validate_freeze_backfill(loop: Loop) -> None:
    body = {"model_ids": loop.models, "settings": {"min_frozen_examples": 1}}
    opened = loop.client("owner").post(f"{LOOP}/collection", json=body)
    assert opened.status_code == 201, opened.get_json()

    loop.pool.output = "positive"
    fooled_kept = loop.write("the plot drags but I loved every minute", "negative")
    fooled_rejected = loop.write("a film", "negative")
    not_fooled = loop.write("a warm, funny, lovely film", "positive")
    assert fooled_kept["fooled"] and fooled_rejected["fooled"] and not not_fooled["fooled"]
    assert all("label" not in inputs for _, inputs in loop.pool.calls)  # inputs only

    assert loop.vote("writer", fooled_kept["id"], "correct") == 403  # never one's own
    assert loop.vote("val1", fooled_kept["id"], "correct") == 201
    assert loop.vote("val2", fooled_kept["id"], "correct") == 201  # two matching: settled
    assert loop.vote("val1", fooled_rejected["id"], "incorrect") == 201
    settle = {"verdict": "incorrect"}
    settled = loop.client("owner").post(
        f"/api/v1/examples/{fooled_rejected['id']}/settle", json=settle
    )
    assert settled.status_code in (200, 201), settled.get_json()
    assert loop.vote("val2", not_fooled["id"], "correct") == 409  # it fooled no one

    vmer = loop.client("val1").get(f"{LOOP}/vmer").get_json()
    human = {t["origin"]: t for t in vmer["totals"]}["human"]
    # 3 submitted, 2 fooled, 1 of them judged incorrect: (2 - 1) / 3
    assert (human["submitted"], human["vmer"]) == (3, pytest.approx(1 / 3))

    waiting = loop.write("the acting is wooden yet somehow I cried", "negative")
    assert waiting["fooled"]  # fooled, never voted on: the freeze must say it leaves it out
    frozen = loop.client("owner").post(f"{LOOP}/freeze")
    assert frozen.status_code == 201, frozen.get_json()
    body = frozen.get_json()
    assert body["frozen_examples"] == 1 and body["dataset"]["examples"] == 1
    assert body["dropped_examples"] == {"unsettled": 1, "rejected": 1, "did_not_fool": 1}
    listing = loop.client("owner").get("/api/v1/tasks/sentiment/rounds").get_json()
    [frozen_round] = [r for r in listing["rounds"] if r["name"] == ROUND]
    assert [d["source"] for d in frozen_round["datasets"]] == ["collected"]
    assert len(body["backfill_jobs"]) == 2  # one per scored model
    assert loop.client("owner").post(f"{LOOP}/freeze").status_code == 409  # once only
    assert sorted(loop.pool.stopped) == sorted(loop.models)  # the frozen round's live models

    runtimes: list[FakeRuntime] = []
    worker = Worker(
        loop.service.store, loop.service.blobs, loop.service.tasks,
        runtime_factory=factory_of(lambda spec: FakeModel(), runtimes),
        heartbeat_s=0.05, poll_s=0.05, config_dir=loop.service.config_dir,
    )  # fmt: skip
    assert worker.work(burst=True).done == 2
    with loop.service.db.session() as session:
        scored = set(
            session.scalars(select(ScoreRow.model_id).where(ScoreRow.round == ROUND).distinct())
        )
    assert scored == set(loop.models)  # every model on the board is scored on the new round
    assert loop.service.rescore_stale(["sentiment"]) == []  # and nothing is left to backfill
