"""Idempotent submissions: 14 uploads that timed out on their clients had in fact been
accepted and charged, and a retry submitted and charged again. A submission now carries an
``Idempotency-Key`` (the SDK and CLI send one by default): a repeat by the same submitter
answers with the first submission, stores nothing and charges nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from flask.testing import FlaskClient

from api.app import create_app
from client.sdk import DynaevalClient
from store.accounts import Accounts
from store.idempotency import DuplicateSubmission
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import assert_error, image_tar, stored_rows, upload
from tests.unit.test_api_sdk import YES, Live, live  # noqa: F401, F811 - the live server fixture
from usecases.service import Service

KEY = "ci-3f2a9c1-run-17"
REF = {"name": "m", "runtime": {"kind": "docker", "image": YES, "protocol": "v1"}}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = Service.open(tmp_path / "data")
    yield svc
    svc.close()


def researcher(service: Service, name: str = "rita") -> FlaskClient:
    return signed_in(create_app(service).test_client(), issue_token(service, name, "researcher"))


def quota_used(client: FlaskClient) -> int:
    return int(client.get("/api/v1/tasks/sentiment/quota").get_json()["daily"]["used"])


def uploads(service: Service) -> list[Path]:
    return [p for p in Path(service.blobs.root).rglob("*") if p.is_file()]


def test_a_repeated_upload_is_the_first_submission_stored_and_charged_once(
    service: Service,
) -> None:
    client = researcher(service)
    client.environ_base["HTTP_IDEMPOTENCY_KEY"] = KEY
    first = upload(client, image_tar())
    assert first.status_code == 201, first.get_json()
    again = upload(client, image_tar())
    assert again.status_code == 200
    body = again.get_json()
    assert body["id"] == first.get_json()["id"] and body["replayed"] is True
    assert body["job_id"] == first.get_json()["job_id"]
    assert stored_rows(service) == (1, 1) and len(uploads(service)) == 1
    assert quota_used(client) == 1


def test_a_json_submission_repeats_the_same_way(service: Service) -> None:
    client = researcher(service)
    headers = {"Idempotency-Key": KEY}
    first = client.post("/api/v1/tasks/sentiment/submissions", json=REF, headers=headers)
    again = client.post("/api/v1/tasks/sentiment/submissions", json=REF, headers=headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.get_json()["id"] == first.get_json()["id"]
    assert stored_rows(service) == (1, 1)


def test_a_key_repeated_with_other_requirements_is_refused_not_replayed(
    service: Service,
) -> None:
    """A repeat with other (or invalid) requirements was answered with the first
    submission, the new ones silently ignored (outside tester)."""
    client = researcher(service)
    headers = {"Idempotency-Key": KEY}
    url = "/api/v1/tasks/sentiment/submissions"
    first = client.post(url, json={**REF, "requirements": {"labels": ["a", "b"]}}, headers=headers)
    assert first.status_code == 201, first.get_json()
    same = client.post(url, json={**REF, "requirements": {"labels": ["b", "a"]}}, headers=headers)
    assert same.status_code == 200 and same.get_json()["replayed"] is True
    other = client.post(url, json={**REF, "requirements": {"labels": ["c"]}}, headers=headers)
    assert_error(other, 422, "idempotency_key_reused")
    assert "other requirements" in other.get_json()["error"]["message"]
    none = client.post(url, json=REF, headers=headers)
    assert_error(none, 422, "idempotency_key_reused")
    bad = client.post(url, json={**REF, "requirements": {"gpus": -1}}, headers=headers)
    assert_error(bad, 422, "invalid_requirements")
    assert stored_rows(service) == (1, 1)


def test_a_replay_is_answered_even_at_the_quota(service: Service) -> None:
    """The repeat of a submission that used the last of the quota is that submission."""
    client = researcher(service)
    task = service.tasks["sentiment"]
    service.tasks["sentiment"] = task.__class__(
        **{**task.__dict__, "quotas": task.quotas.__class__(per_day=1, total=None)}
    )
    headers = {"Idempotency-Key": KEY}
    assert (
        client.post("/api/v1/tasks/sentiment/submissions", json=REF, headers=headers).status_code
        == 201
    )
    assert (
        client.post("/api/v1/tasks/sentiment/submissions", json=REF, headers=headers).status_code
        == 200
    )
    assert_error(client.post("/api/v1/tasks/sentiment/submissions", json=REF), 429)


def test_keys_are_the_submitters_own(service: Service) -> None:
    headers = {"Idempotency-Key": KEY}
    rita, bob = researcher(service, "rita"), researcher(service, "bob")
    first = rita.post("/api/v1/tasks/sentiment/submissions", json=REF, headers=headers)
    other = bob.post("/api/v1/tasks/sentiment/submissions", json=REF, headers=headers)
    assert (first.status_code, other.status_code) == (201, 201)
    assert first.get_json()["id"] != other.get_json()["id"]


def test_a_key_is_not_reused_across_tasks_nor_malformed(service: Service) -> None:
    client = researcher(service)
    headers = {"Idempotency-Key": KEY}
    client.post("/api/v1/tasks/sentiment/submissions", json=REF, headers=headers)
    other = client.post("/api/v1/tasks/nli/submissions", json=REF, headers=headers)
    assert_error(other, 422, "idempotency_key_reused")
    for bad in ("", "x" * 129, "has space", "semi;colon", "é"):
        response = client.post(
            "/api/v1/tasks/sentiment/submissions", json=REF, headers={"Idempotency-Key": bad}
        )
        assert_error(response, 422, "invalid_idempotency_key")
    assert stored_rows(service) == (1, 1)


def test_two_requests_racing_with_one_key_make_one_submission(service: Service) -> None:
    owner = str(Accounts(service.db).add_user("rita", "researcher")["id"])
    service.store.submit("sentiment", "m", REF["runtime"], owner_id=owner, idempotency_key=KEY)
    with pytest.raises(DuplicateSubmission) as caught:
        service.store.submit("sentiment", "m", REF["runtime"], owner_id=owner, idempotency_key=KEY)
    assert stored_rows(service) == (1, 1) and caught.value.first.name == "m"


def test_the_sdk_retries_a_timed_out_submission_with_its_key(
    live: Live,  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first request reaches the server, but its answer is lost to a client timeout:
    the SDK's retry (same key) returns that submission, and there is one."""
    client = DynaevalClient(live.url, api_key=live.api_key)
    real = client.http.request
    calls: list[dict[str, Any]] = []

    def lossy(method: str, url: str, **kwargs: Any) -> requests.Response:
        response = real(method, url, **kwargs)
        calls.append(kwargs.get("headers", {}))
        if len(calls) == 1:
            raise requests.ReadTimeout("read timeout=60")
        return response

    monkeypatch.setattr(client.http, "request", lossy)
    monkeypatch.setattr("client.sdk.time.sleep", lambda s: None)
    created = client.submit("toy", "m", REF["runtime"])
    assert created["replayed"] is True and created["retried"] == 1
    assert calls[0]["Idempotency-Key"] == calls[1]["Idempotency-Key"]
    assert [s["id"] for s in live.service.queries.submissions()] == [created["id"]]


def test_concurrent_uploads_with_one_key_store_one(service: Service) -> None:
    app = create_app(service)
    token = issue_token(service, "rita", "researcher")
    answers: list[int] = []

    def send() -> None:
        client = signed_in(app.test_client(), token)
        client.environ_base["HTTP_IDEMPOTENCY_KEY"] = KEY
        answers.append(upload(client, image_tar()).status_code)

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(answers) == [200, 200, 200, 201]
    assert stored_rows(service) == (1, 1) and len(uploads(service)) == 1


def test_a_key_repeated_with_another_name_is_refused(service: Service) -> None:
    """A replay answered with the first submission whatever the body said (found from
    outside): a different name under the same key is a mistake, said so."""
    client = researcher(service)
    headers = {"Idempotency-Key": KEY}
    client.post("/api/v1/tasks/sentiment/submissions", json=REF, headers=headers)
    other = client.post(
        "/api/v1/tasks/sentiment/submissions", json={**REF, "name": "other"}, headers=headers
    )
    assert_error(other, 422, "idempotency_key_reused")
    client.environ_base["HTTP_IDEMPOTENCY_KEY"] = "upload-key"
    assert upload(client, image_tar()).status_code == 201
    assert_error(upload(client, image_tar(), name="renamed"), 422, "idempotency_key_reused")
    assert stored_rows(service) == (2, 2)


def test_a_retry_that_meets_the_quota_its_first_request_used_is_that_submission(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The retry passed the key lookup while its first request was still being checked;
    the first then took the last of the quota: the retry answered 429 for a submission
    that had landed (found in review). It is now answered with that submission."""
    import api.routes

    client = researcher(service)
    task = service.tasks["sentiment"]
    service.tasks["sentiment"] = task.__class__(
        **{**task.__dict__, "quotas": task.quotas.__class__(per_day=1, total=None)}
    )
    headers = {"Idempotency-Key": KEY}
    first = client.post("/api/v1/tasks/sentiment/submissions", json=REF, headers=headers)
    assert first.status_code == 201
    real, looked = api.routes.find_by_key, []

    def late(*args: Any) -> Any:  # the first lookup ran before the first request landed
        looked.append(args)
        return None if len(looked) == 1 else real(*args)

    monkeypatch.setattr(api.routes, "find_by_key", late)
    retry = client.post("/api/v1/tasks/sentiment/submissions", json=REF, headers=headers)
    assert retry.status_code == 200, retry.get_json()
    assert retry.get_json()["id"] == first.get_json()["id"] and len(looked) == 2
