"""The model page's newest-job section: a failure's reason and log tail are shown to the
submitter, the task's owner and admins, never to anyone else (not even once the model is
published), and a model that failed before it was ever scored has a page for them too."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from api.app import create_app
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import JobStatus, Settlement
from configs.vocabulary.results import Failure
from store.accounts import Accounts
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import AXES_A, PROCESS, finished
from usecases.service import Service

LOG = "Traceback: KeyError statement in model.py line 12"


@dataclass
class World:
    service: Service
    tokens: dict[str, str]
    failed: str
    scored: str

    def get(self, who: str | None, path: str) -> tuple[int, str]:
        client: FlaskClient = create_app(self.service).test_client()
        if who:
            signed_in(client, self.tokens[who])
        answer = client.get(path)
        return answer.status_code, answer.get_data(as_text=True)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    service = Service.open(tmp_path / "data")
    tokens = {name: issue_token(service, name, "researcher") for name in ("alice", "bob")}
    tokens["admin"] = issue_token(service, "admin", "admin")
    accounts = Accounts(service.db, service.clock)
    alice = accounts.user_by_name("alice")["id"]
    failed, _ = service.store.submit("sentiment", "broken", PROCESS, owner_id=alice)
    claimed = service.store.claim("w", 60)
    assert claimed is not None
    failure = Failure(FailureCode.BAD_JSON, "the reply was not JSON", LOG)
    settled = Settlement(JobStatus.FAILED, None, "failed")
    service.store.fail(claimed.id, "w", failure, settled, lease=claimed.lease)
    scored = finished(service, "scored", AXES_A)
    accounts.set_model_owner(scored, alice)
    try:
        yield World(service, tokens, failed, scored)
    finally:
        service.close()


@pytest.mark.parametrize("who", ["alice", "admin"])
def test_the_submitter_and_admins_see_why_it_failed(world: World, who: str) -> None:
    status, page = world.get(who, f"/models/{world.failed}")
    assert status == 200
    assert "bad_json" in page and "the reply was not JSON" in page and LOG in page


@pytest.mark.parametrize("who", [None, "bob"])
def test_nobody_else_sees_the_failed_model(world: World, who: str | None) -> None:
    status, page = world.get(who, f"/models/{world.failed}")
    assert status == 404 and LOG not in page


def test_publishing_shows_scores_never_the_job(world: World) -> None:
    Accounts(world.service.db).set_published(world.scored, True)
    status, page = world.get(None, f"/models/{world.scored}")
    assert status == 200 and 'id="summary"' in page and 'id="job"' not in page
    status, page = world.get("alice", f"/models/{world.scored}")
    assert status == 200 and 'id="job"' in page and "done" in page
