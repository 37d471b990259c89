"""Reruns: a job that failed through platform faults (its workers kept dying) is retried in
place by an operator, through the API or the CLI, with its attempt history kept and nothing
charged to the submitter."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from client.cli import main
from configs.schema import QuotaSpec
from configs.vocabulary.clock import ManualClock
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import DEFAULT_RETRY_POLICY, JobStatus
from configs.vocabulary.results import Failure
from store.models import AttemptRow
from store.quotas import charged_usage
from tests.unit.test_api import DOCKER
from tests.unit.test_submissions_manage import client_of, owned_by
from usecases.service import Service


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = Service.open(tmp_path / "data", clock=ManualClock())
    yield svc
    svc.close()


def lost_until_failed(service: Service) -> tuple[str, str]:
    """A submission whose every attempt ended as a platform fault until its job failed."""
    model_id, job_id = service.store.submit("sentiment", "m", DOCKER)
    if _has_user(service, "alice"):
        owned_by(service, "alice", model_id)
    lost = Failure(FailureCode.WORKER_LOST, "the worker stopped sending heartbeats")
    for _ in range(20):  # bounded: the cap ends it long before
        service.clock.advance(3600)  # type: ignore[attr-defined]  # past any back-off
        job = service.store.claim("w", lease_s=60)
        if job is None:
            break
        settlement = DEFAULT_RETRY_POLICY.decide(
            lost.code, job.attempt, service.clock.now(), platform_faults=job.platform_faults
        )
        service.store.fail(job.id, "w", lost, settlement, lease=job.lease)
    return model_id, job_id


def _has_user(service: Service, name: str) -> bool:
    from store.accounts import Accounts

    return Accounts(service.db).user_by_name(name) is not None


def attempts(service: Service, job_id: str) -> list[str]:
    with service.db.session() as session:
        rows = session.scalars(
            select(AttemptRow).where(AttemptRow.job_id == job_id).order_by(AttemptRow.attempt)
        ).all()
        return [row.outcome or "" for row in rows]


def test_an_operator_retries_a_job_that_failed_through_platform_faults(service: Service) -> None:
    admin = client_of(service, "admin", "admin")
    client_of(service, "alice", "researcher")
    model_id, job_id = lost_until_failed(service)
    before = attempts(service, job_id)
    job = admin.get(f"/api/v1/submissions/{model_id}").get_json()["job"]
    assert job["status"] == "failed" and job["failure"]["code"] == "worker_lost"
    assert len(before) >= 2  # it was retried by the platform before giving up
    alice = _user_id(service, "alice")
    usage = charged_usage(service.db, alice, "sentiment", service.clock.now())
    assert (usage.today, usage.total) == (0, 0)  # the platform's fault costs alice nothing

    answer = admin.post(f"/api/v1/submissions/{model_id}/rerun")
    assert answer.status_code == 201, answer.get_json()
    assert answer.get_json() == {"id": model_id, "job_id": job_id, "status": "queued"}
    assert attempts(service, job_id) == before  # the history stays
    again = service.store.claim("w2", lease_s=60)
    assert again is not None and again.id == job_id and again.attempt == len(before) + 1
    twice = admin.post(f"/api/v1/submissions/{model_id}/rerun")
    assert twice.status_code == 409 and twice.get_json()["error"]["code"] == "already_queued"


def test_a_researcher_reruns_their_own_within_their_quota_and_no_one_elses(
    service: Service,
) -> None:
    alice = client_of(service, "alice", "researcher")
    client_of(service, "bob", "researcher")
    model_id, job_id = lost_until_failed(service)
    owned_by(service, "alice", model_id)
    bobs, _ = service.store.submit("sentiment", "b", DOCKER)
    owned_by(service, "bob", bobs)
    refused = alice.post(f"/api/v1/submissions/{bobs}/rerun")
    assert refused.status_code == 404  # another's submission does not exist for her
    answer = alice.post(f"/api/v1/submissions/{model_id}/rerun")
    assert answer.status_code == 201 and answer.get_json()["job_id"] == job_id
    service.store.cancel(model_id, "cancelled by alice")
    service.tasks["sentiment"] = dataclasses.replace(
        service.tasks["sentiment"], quotas=QuotaSpec(per_day=None, total=0)
    )
    full = alice.post(f"/api/v1/submissions/{model_id}/rerun")
    assert full.status_code == 429 and full.get_json()["error"]["code"] == "quota_exceeded"


def test_the_cli_reruns_on_the_configured_database(
    service: Service,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model_id, job_id = lost_until_failed(service)
    monkeypatch.setenv("DYNAEVAL_DATA_DIR", str(tmp_path / "data"))
    assert main(["rerun", model_id]) == 0
    assert f"job {job_id} queued" in capsys.readouterr().out
    assert service.queries.submission(model_id)["job"]["status"] == JobStatus.QUEUED  # type: ignore[index]
    assert main(["rerun", model_id]) == 2  # queued already: a usage error, one line
    assert "already has a job queued" in capsys.readouterr().err
    assert main(["rerun", "no-such-model"]) == 2


def _user_id(service: Service, name: str) -> str:
    from store.accounts import Accounts

    user = Accounts(service.db).user_by_name(name)
    assert user is not None
    return str(user["id"])
