"""Rounds and datasets through the API: a task owner adds a round and a worker of another
service on the same database scores it without a restart; the same content twice creates
nothing; changed content is a new version with old scores kept; a bad file is a 422 naming
the line with nothing stored; and every role against the routes."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from api.app import create_app
from configs.paths import CONFIG_DIR
from configs.vocabulary.clock import ManualClock
from configs.vocabulary.results import EvaluationResult, Score, ScoreKey
from store.accounts import Accounts
from store.models import ScoreRow
from store.tasks import TaskVersions
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import AXES_A, AXES_B, assert_error
from tests.unit.test_task_catalog import small_config
from tests.unit.test_worker import FakeModel, FakeRuntime, factory_of
from usecases.service import Service
from worker.worker import Worker

ROUNDS = "/api/v1/tasks/sentiment/rounds"
FAKE = {"kind": "process", "command": ["fake"], "protocol": "v1"}


def rows(count: int, start: int = 0, **override: Any) -> bytes:
    """``count`` valid sentiment rows (uids from ``start``), each changed by ``override``."""
    lines = [
        {"uid": f"new-{i}", "statement": f"statement {i}", "label": "positive", "topic": "t",
         **override}
        for i in range(start, start + count)
    ]  # fmt: skip
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    config_dir = small_config(tmp_path / "configs")
    svc = Service.open(tmp_path / "data", config_dir=config_dir, clock=ManualClock())
    accounts = Accounts(svc.db, svc.clock)
    issue_token(svc, "carol", "researcher")
    accounts.set_task_access("sentiment", "carol", private=False)
    yield svc
    svc.close()


def client(service: Service, name: str | None = "carol", role: str = "researcher") -> FlaskClient:
    made = create_app(service).test_client()
    return made if name is None else signed_in(made, issue_token(service, name, role))


def upload(client: FlaskClient, path: str, data: bytes, **form: Any) -> Any:
    body = {**{k: str(v) for k, v in form.items()}, "data": (io.BytesIO(data), "new.jsonl")}
    return client.post(path, data=body, content_type="multipart/form-data")


def scored_now(service: Service, name: str, axes: dict[str, float]) -> str:
    """A hand-made finished result (all axes) on the task's data as it is now."""
    model_id, job_id = service.store.submit("sentiment", name, FAKE)
    claimed = service.store.claim("seed-worker", 60)
    assert claimed is not None and claimed.id == job_id
    hashes = dict(service.dataset_hashes("sentiment"))
    result = EvaluationResult(
        task="sentiment",
        status="done",
        summary={**axes, "metric": "macro_f1"},
        rounds=[{"round": "r1", "performance": axes["performance"], "performance_ci": None}],
        scores=[Score(ScoreKey("sentiment", "r1", "test", hashes["r1/test"]), 50.0, 20)],
        provenance={"code_version": "test", "dataset_hashes": hashes},
    )
    assert service.store.finish(job_id, "seed-worker", result, lease=claimed.lease)
    return model_id


def board(service: Service) -> dict[str, dict[str, Any]]:
    """The leaderboard's ranked models by name."""
    found = client(service, None).get("/api/v1/tasks/sentiment/leaderboard").get_json()
    return {entry["name"]: entry for entry in found["models"]}


def blob_files(service: Service) -> list[str]:
    return sorted(service.blobs.keys("datasets/"))


def test_owner_adds_a_round_and_another_service_scores_it_without_a_restart(
    service: Service, tmp_path: Path
) -> None:
    other = Service.open(tmp_path / "data", config_dir=service.config_dir, clock=ManualClock())
    before = scored_now(service, "before", AXES_A)
    service.store.submit("sentiment", "queued", FAKE)
    runtimes: list[FakeRuntime] = []
    worker = Worker(
        other.store, other.blobs, other.tasks, runtime_factory=factory_of(lambda s: FakeModel(), runtimes),
        heartbeat_s=0.05, poll_s=0.05, config_dir=other.config_dir,
    )  # fmt: skip
    assert worker.work(burst=True).done == 1
    owner = client(service)
    added = upload(owner, ROUNDS, rows(12), name="r2", weight=2)
    assert added.status_code == 201, added.get_json()
    body = added.get_json()
    assert (body["task_version"], body["created"], body["round"]["weight"]) == (2, True, 2.0)
    assert body["dataset"]["examples"] == 12 and body["dataset"]["source"] == "upload"
    assert len(body["backfill_jobs"]) == 2  # "before" and "queued", scored on r1 only
    scored_now(service, "now", AXES_B)
    entries = board(service)  # scored before the round existed: partial, never a silent 0
    assert entries["before"]["partial"] and entries["before"]["not_scored_on"] == ["r2/test"]
    assert not entries["now"]["partial"] and entries["before"]["performance"] == 90.0
    new_model, _ = service.store.submit("sentiment", "after", FAKE)
    assert worker.work(burst=True).done == 4  # 1 before + "after" + 2 backfills, same worker
    results = service.queries.submission(new_model, with_scores=True)["results"]
    assert [r["round"] for r in results["rounds"]] == ["r1", "r2"]
    assert results["provenance"]["task_version"] == 2
    assert set(results["provenance"]["dataset_hashes"]) == {"r1/test", "r2/test"}
    with service.db.session() as session:  # backfilled (the two services' manual clocks
        # differ, so "newest result" is not a fair question here; its scores are)
        rounds = set(session.scalars(select(ScoreRow.round).where(ScoreRow.model_id == before)))
    assert rounds == {"r1", "r2"}
    listed = client(service, None).get(ROUNDS).get_json()
    assert [r["name"] for r in listed["rounds"]] == ["r1", "r2"]
    assert "statement" not in json.dumps(listed)  # no examples, no labels
    other.close()


def test_the_same_content_twice_creates_nothing(service: Service) -> None:
    owner = client(service)
    assert upload(owner, ROUNDS, rows(5), name="r2").status_code == 201
    again = upload(owner, ROUNDS, rows(5), name="r2")
    assert again.status_code == 200 and again.get_json()["created"] is False
    same = upload(owner, f"{ROUNDS}/r2/datasets", rows(5))
    assert same.status_code == 200 and same.get_json()["dataset"]["version"] == 1
    shipped = (service.config_dir / "datasets/s/r1.jsonl").read_bytes()
    as_file = upload(owner, f"{ROUNDS}/r1/datasets", shipped)
    assert as_file.status_code == 200 and as_file.get_json()["dataset"]["source"] == "file"
    assert TaskVersions(service.db).latest_version("sentiment") == 2
    assert len(blob_files(service)) == 1  # the shipped file's content left no blob


def test_changed_content_is_a_new_version_and_old_scores_stay(service: Service) -> None:
    owner = client(service)
    upload(owner, ROUNDS, rows(5), name="r2")
    model_id, _ = service.store.submit("sentiment", "m", FAKE)
    worker = Worker(
        service.store, service.blobs, service.tasks, runtime_factory=factory_of(lambda s: FakeModel(), []),
        heartbeat_s=0.05, poll_s=0.05, config_dir=service.config_dir,
    )  # fmt: skip
    assert worker.work(burst=True).done == 1
    first = service.queries.submission(model_id)["results"]["provenance"]["dataset_hashes"]
    scored_now(service, "hand-made", AXES_A)
    changed = upload(owner, f"{ROUNDS}/r2/datasets", rows(6))
    assert changed.status_code == 201
    assert (changed.get_json()["dataset"]["version"], changed.get_json()["task_version"]) == (2, 3)
    extra = upload(owner, f"{ROUNDS}/r2/datasets", rows(3), dataset="extra")
    assert extra.status_code == 201 and extra.get_json()["dataset"]["version"] == 1
    kept = service.queries.submission(model_id, with_scores=True)
    assert kept["results"]["provenance"]["dataset_hashes"] == first  # labelled with its data
    assert {s["round"] for s in kept["scores"]} == {"r1", "r2"}
    entry = board(service)["hand-made"]
    assert entry["partial"] and entry["not_scored_on"] == ["r2/extra", "r2/test"]
    listed = client(service, None).get(ROUNDS).get_json()["rounds"][1]["datasets"]
    assert [(d["name"], d["version"]) for d in listed] == [("test", 2), ("extra", 1)]
    replaced = upload(owner, f"{ROUNDS}/r1/datasets", rows(4)).get_json()["dataset"]
    assert (replaced["version"], replaced["source"]) == (2, "upload")  # the file was 1


BAD = [
    (rows(2) + b'{"uid": "x", "label": "positive", "topic": "t"}\n', "new.jsonl:3", "statement"),
    (rows(1, label="happy"), "new.jsonl:1", "label 'happy'"),
    (rows(3) + rows(1, start=1), "new.jsonl:4", "duplicate uid"),
    (rows(1) + b"{not json\n", "new.jsonl:2", "not JSON"),
    (rows(1) + b"\xff\xfe\n", "new.jsonl:2", "not UTF-8"),
    (b"\n\n", "new.jsonl", "no examples"),
    (rows(1) + b"[" * 100_000 + b"\n", "new.jsonl:2", "nested too deeply"),
]


@pytest.mark.parametrize(("data", "where", "problem"), BAD)
def test_a_bad_file_is_422_naming_the_line_and_nothing_is_stored(
    service: Service, data: bytes, where: str, problem: str
) -> None:
    owner = client(service)
    for path, form in ((ROUNDS, {"name": "r2"}), (f"{ROUNDS}/r1/datasets", {})):
        error = assert_error(upload(owner, path, data, **form), 422, "invalid_dataset")
        assert error["message"].startswith(where) and problem in error["message"], error
    assert blob_files(service) == [] and list(service.blobs.keys()) == []
    assert TaskVersions(service.db).latest_version("sentiment") == 1


def test_a_bad_answer_span_is_422(tmp_path: Path) -> None:
    svc = Service.open(tmp_path / "data", config_dir=CONFIG_DIR)
    try:
        admin = signed_in(create_app(svc).test_client(), issue_token(svc))
        line = {"uid": "q", "context": "abc def", "question": "?", "answer": "def",
                "answer_start": 1, "topic": "t"}  # fmt: skip
        data = (json.dumps(line) + "\n").encode()
        error = assert_error(upload(admin, "/api/v1/tasks/qa/rounds", data, name="r9"), 422)
        assert error["message"].startswith("new.jsonl:1") and "answer_start" in error["message"]
        assert list(svc.blobs.keys("datasets/")) == []
    finally:
        svc.close()


def test_too_large_an_upload_is_413_and_nothing_is_stored(service: Service) -> None:
    service.max_dataset_bytes = 500
    error = assert_error(upload(client(service), ROUNDS, rows(20), name="r2"), 413)
    assert error["code"] == "dataset_too_large" and "500 bytes" in error["message"]
    assert list(service.blobs.keys()) == []
    assert TaskVersions(service.db).latest_version("sentiment") == 1


def test_weights_change_by_patch_and_bad_requests_are_4xx(service: Service) -> None:
    owner = client(service)
    changed = owner.patch(f"{ROUNDS}/r1", json={"weight": 3})
    assert changed.status_code == 200 and changed.get_json()["round"]["weight"] == 3.0
    assert owner.patch(f"{ROUNDS}/r1", json={"weight": 3}).get_json()["task_version"] == 2
    assert_error(owner.patch(f"{ROUNDS}/r1", json={"weight": 0}), 422)
    assert_error(owner.patch(f"{ROUNDS}/nope", json={"weight": 1}), 404, "unknown_round")
    assert_error(upload(owner, f"{ROUNDS}/nope/datasets", rows(2)), 404, "unknown_round")
    assert_error(upload(owner, ROUNDS, rows(2), name="bad name"), 422)
    assert_error(upload(owner, ROUNDS, rows(2), name="r1", dataset="other"), 409, "round_exists")
    missing = owner.post(ROUNDS, data={"name": "r2"}, content_type="multipart/form-data")
    assert_error(missing, 422, "invalid_dataset")
    assert service.tasks["sentiment"].rounds[0].weight == 3.0


def test_every_role_against_the_routes(service: Service) -> None:
    issue_token(service, "bob", "researcher")
    anonymous, bob = client(service, None), client(service, "bob")
    admin, carol = client(service, "admin", "admin"), client(service)
    read_only = signed_in(
        create_app(service).test_client(), issue_token(service, "carol", scopes=["read"])
    )
    assert anonymous.get(ROUNDS).status_code == 200
    assert_error(upload(anonymous, ROUNDS, rows(2), name="r2"), 401)
    assert_error(upload(bob, ROUNDS, rows(2), name="r2"), 403, "not_task_owner")
    assert_error(upload(read_only, ROUNDS, rows(2), name="r2"), 403, "insufficient_scope")
    assert_error(bob.patch(f"{ROUNDS}/r1", json={"weight": 2}), 403, "not_task_owner")
    assert_error(anonymous.patch(f"{ROUNDS}/r1", json={"weight": 2}), 401)
    assert upload(carol, ROUNDS, rows(2), name="r2").status_code == 201
    assert upload(admin, ROUNDS, rows(2), name="r3").status_code == 201
    assert upload(admin, f"{ROUNDS}/r3/datasets", rows(3)).status_code == 201
    Accounts(service.db).set_task_access("sentiment", "carol", private=True)
    for outsider in (anonymous, bob):
        assert_error(outsider.get(ROUNDS), 404, "unknown_task")
        assert_error(upload(bob, f"{ROUNDS}/r1/datasets", rows(2)), 404, "unknown_task")
        assert_error(bob.patch(f"{ROUNDS}/r1", json={"weight": 2}), 404, "unknown_task")
    assert carol.get(ROUNDS).status_code == 200 and admin.get(ROUNDS).status_code == 200
