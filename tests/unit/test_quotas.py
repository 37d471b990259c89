"""Submission quotas per user per task: counted from the store on the service's clock,
enforced at submit (429, nothing stored), reported by GET /tasks/{task}/quota; only what the
submitter caused is charged, admins are exempt; the ``quotas:`` config block is strict."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import func, select

from api.app import create_app
from configs.schema import QuotaSpec
from configs.vocabulary.clock import ManualClock
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import JobStatus, Settlement
from configs.vocabulary.results import Failure
from evaluator.tasks import load_tasks
from store.models import ModelRow
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import DOCKER, assert_error
from tests.unit.test_config import base_task, load_error, write_task
from usecases.service import Service

URL = "/api/v1/tasks/sentiment/submissions"
QUOTA = "/api/v1/tasks/sentiment/quota"
BODY = {"name": "m", "runtime": {**DOCKER, "image": "ghcr.io/team/model:1"}}


@dataclasses.dataclass
class Env:
    service: Service
    clock: ManualClock
    alice: FlaskClient
    admin: FlaskClient

    def models(self) -> int:
        with self.service.db.session() as session:
            return int(session.scalar(select(func.count()).select_from(ModelRow)) or 0)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    clock = ManualClock(datetime(2026, 3, 1, 22, 0))
    service = Service.open(tmp_path / "data", clock=clock)
    task = service.tasks["sentiment"]
    service.tasks["sentiment"] = dataclasses.replace(task, quotas=QuotaSpec(per_day=2, total=3))
    app = create_app(service)
    yield Env(
        service,
        clock,
        signed_in(app.test_client(), issue_token(service, "alice", "researcher")),
        signed_in(app.test_client(), issue_token(service)),
    )
    service.close()


def _submit(client: FlaskClient) -> dict[str, Any]:
    response = client.post(URL, json=BODY)
    assert response.status_code == 201, response.get_data(as_text=True)
    body: dict[str, Any] = response.get_json()
    return body


def _end_job(env: Env, code: FailureCode) -> None:
    """The newest queued job claimed and failed for good with ``code``."""
    claimed = env.service.store.claim("w1", 60)
    assert claimed is not None
    settled = Settlement(JobStatus.FAILED, None, "failed")
    assert env.service.store.fail(
        claimed.id, "w1", Failure(code, "x"), settled, lease=claimed.lease
    )


def test_the_daily_quota_refuses_with_its_reset_and_stores_nothing(env: Env) -> None:
    first = _submit(env.alice)
    assert first["quota"]["daily"] == {
        "limit": 2,
        "used": 1,
        "remaining": 1,
        "resets_at": "2026-03-02T00:00:00Z",
    }
    _submit(env.alice)
    before = env.models()
    refused = env.alice.post(URL, json=BODY)
    error = assert_error(refused, 429, "quota_exceeded")
    assert "per day" in error["message"] and "2026-03-02T00:00:00Z" in error["message"]
    assert refused.headers["Retry-After"] == str(2 * 3600)  # 22:00 to midnight UTC
    assert env.models() == before  # nothing stored
    quota = env.alice.get(QUOTA).get_json()
    assert quota["daily"]["remaining"] == 0 and quota["total"]["remaining"] == 1


def test_a_new_utc_day_resets_the_daily_quota_but_not_the_total(env: Env) -> None:
    _submit(env.alice)
    _submit(env.alice)
    env.clock.advance(2 * 3600)  # 2026-03-02 00:00 UTC
    assert env.alice.get(QUOTA).get_json()["daily"]["used"] == 0
    third = _submit(env.alice)
    assert third["quota"]["total"] == {"limit": 3, "used": 3, "remaining": 0}
    refused = env.alice.post(URL, json=BODY)
    error = assert_error(refused, 429, "quota_exceeded")
    assert "all 3 submissions" in error["message"] and "Retry-After" not in refused.headers


@pytest.mark.parametrize(
    "code", [FailureCode.PLATFORM_ERROR, FailureCode.WORKER_LOST, FailureCode.CANCELLED]
)
def test_what_the_platform_caused_or_a_cancel_is_not_charged(env: Env, code: FailureCode) -> None:
    _submit(env.alice)
    _end_job(env, code)
    quota = env.alice.get(QUOTA).get_json()
    assert quota["daily"]["used"] == 0 and quota["total"]["used"] == 0


def test_a_cancel_through_the_api_is_not_charged(env: Env) -> None:
    model_id = _submit(env.alice)["id"]
    assert env.alice.post(f"/api/v1/submissions/{model_id}/cancel").status_code == 200
    assert env.alice.get(QUOTA).get_json()["daily"]["used"] == 0


@pytest.mark.parametrize("code", [FailureCode.OOM_KILLED, FailureCode.IMAGE_NOT_LOADABLE])
def test_a_failure_the_submission_caused_is_charged(env: Env, code: FailureCode) -> None:
    _submit(env.alice)
    _end_job(env, code)
    assert env.alice.get(QUOTA).get_json()["daily"]["used"] == 1


def test_admins_are_exempt(env: Env) -> None:
    for _ in range(4):
        assert _submit(env.admin)["quota"]["exempt"] is True
    quota = env.admin.get(QUOTA).get_json()
    assert quota["daily"]["limit"] is None and quota["daily"]["remaining"] is None


def test_quotas_are_per_user_and_per_task(env: Env) -> None:
    _submit(env.alice)
    _submit(env.alice)
    assert env.alice.post("/api/v1/tasks/nli/submissions", json=BODY).status_code == 201
    bob_token = issue_token(env.service, "bob", "researcher")
    bob = signed_in(env.alice.application.test_client(), bob_token)
    assert _submit(bob)["quota"]["daily"]["used"] == 1


# -- config -----------------------------------------------------------------------------------
def test_every_task_inherits_the_default_quotas() -> None:
    assert {t.quotas for t in load_tasks().values()} == {QuotaSpec(per_day=10, total=None)}


def test_a_task_may_set_its_own_quotas(config_dir: Path) -> None:
    write_task(config_dir, {**base_task(), "quotas": {"total": 5}})
    assert load_tasks(config_dir / "tasks")["toy"].quotas == QuotaSpec(per_day=10, total=5)


@pytest.mark.parametrize(
    ("quotas", "field"),
    [
        ({"per_day": 0}, "quotas.per_day"),
        ({"per_day": -1}, "quotas.per_day"),
        ({"total": 2.5}, "quotas.total"),
        ({"total": True}, "quotas.total"),
        ({"per_day": "3"}, "quotas.per_day"),
        ({"weekly": 3}, "quotas.weekly"),
        ([3], "quotas"),
    ],
)
def test_bad_quotas_name_their_field(config_dir: Path, quotas: Any, field: str) -> None:
    write_task(config_dir, {**base_task(), "quotas": quotas})
    assert load_error(config_dir).field == field
