"""Image retention: scored models' images are kept (backfills need them), images that never
scored go after the configured days, nothing waiting or running is touched, and a model
whose image is gone says so everywhere (its row, the API, the leaderboard), keeps its scores,
and gets no backfill. A backfill that finds the image gone fails as ``image_gone``: not
retried, not charged, and the row is marked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from api.app import create_app
from client.cli import main
from configs.settings import ImageRetention, load_settings
from configs.vocabulary.clock import ManualClock
from configs.vocabulary.results import EvaluationResult, Score, ScoreKey
from store.accounts import Accounts
from store.blobs import BlobStore
from store.models import JobRow, ModelRow
from store.retention import prune_images
from tests.unit.auth_helpers import issue_token
from tests.unit.test_api import AXES_A
from tests.unit.test_rounds_api import ROUNDS, client, rows, upload
from tests.unit.test_task_catalog import small_config
from tests.unit.test_worker import FakeModel, factory_of
from usecases.service import Service
from worker.worker import Worker

DAY = 24 * 3600


def uploaded(service: Service, name: str) -> tuple[str, str, str]:
    """A model whose runtime names an uploaded tarball in the blob store (never run here)."""
    key = f"uploads/{name}.tar"
    service.blobs.put_bytes(key, b"not really a tarball")
    runtime = {"kind": "docker", "source": "upload", "protocol": "v1", "blob": key}
    model_id, job_id = service.store.submit("sentiment", name, runtime)
    return model_id, job_id, key


def score(service: Service, job_id: str) -> None:
    claimed = service.store.claim("w", 60)
    assert claimed is not None and claimed.id == job_id
    hashes = dict(service.dataset_hashes("sentiment"))
    result = EvaluationResult(
        task="sentiment", status="done", summary={**AXES_A, "metric": "macro_f1"},
        rounds=[{"round": "r1", "performance": 50.0}],
        scores=[Score(ScoreKey("sentiment", "r1", "test", hashes["r1/test"]), 50.0, 20)],
        provenance={"dataset_hashes": hashes},
    )  # fmt: skip
    assert service.store.finish(job_id, "w", result, lease=claimed.lease)


def cancel(service: Service, model_id: str) -> None:
    assert service.store.cancel(model_id, "stopped by its submitter").cancelled


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = Service.open(
        tmp_path / "data", config_dir=small_config(tmp_path / "configs"), clock=ManualClock()
    )
    issue_token(svc, "carol", "researcher")
    Accounts(svc.db, svc.clock).set_task_access("sentiment", "carol", private=False)
    yield svc
    svc.close()


def gone(service: Service, model_id: str) -> str | None:
    with service.db.session() as session:
        row = session.get(ModelRow, model_id)
        assert row is not None
        return row.image_gone


def test_the_policy_keeps_scored_and_busy_images_and_removes_old_unscored_ones(
    service: Service,
) -> None:
    clock: ManualClock = service.clock  # type: ignore[assignment]
    scored, scored_job, scored_key = uploaded(service, "scored")
    score(service, scored_job)
    old, _, old_key = uploaded(service, "old")
    cancel(service, old)
    clock.advance(20 * DAY)
    recent, _, recent_key = uploaded(service, "recent")
    cancel(service, recent)
    waiting, _, waiting_key = uploaded(service, "waiting")  # queued: never touched
    clock.advance(11 * DAY)
    policy = ImageRetention(unscored_days=30, scored_days=None)

    planned = prune_images(service.db, service.blobs, policy, clock.now(), dry_run=True)
    assert [p.model_id for p in planned] == [old]
    assert service.blobs.exists(old_key) and gone(service, old) is None  # a dry run

    removed = prune_images(service.db, service.blobs, policy, clock.now())
    assert [p.model_id for p in removed] == [old]
    assert not service.blobs.exists(old_key)
    assert "30 days after its job ended without a score" in (gone(service, old) or "")
    for key in (scored_key, recent_key, waiting_key):
        assert service.blobs.exists(key)
    assert prune_images(service.db, service.blobs, policy, clock.now()) == []  # once

    shown = service.queries.submission(old)
    assert shown is not None and shown["image_gone"]["reason"] == gone(service, old)
    assert service.queries.submission(scored)["image_gone"] is None  # type: ignore[index]

    admin = client(service, "root", "admin")
    before = admin.get("/api/v1/tasks/sentiment/leaderboard").get_json()["models"]
    assert [m["image_gone"] for m in before] == [None]  # cached now, and must not stay so
    keep_scored_10 = ImageRetention(unscored_days=None, scored_days=10)
    assert [p.model_id for p in prune_images(service.db, service.blobs, keep_scored_10,
                                             clock.now())] == [scored]  # fmt: skip
    assert not service.blobs.exists(scored_key) and service.blobs.exists(recent_key)
    board = client(service, "root", "admin").get("/api/v1/tasks/sentiment/leaderboard").get_json()
    [entry] = board["models"]  # it keeps its place and scores, and says why
    assert entry["model_id"] == scored and "after its newest score" in entry["image_gone"]["reason"]


class FailingDelete:
    """A blob store whose deletes fail (an S3 outage, a permission)."""

    def __init__(self, inner: BlobStore) -> None:
        self.inner = inner

    def delete(self, key: str) -> None:
        raise OSError("the store refused the delete")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_failed_delete_leaves_the_row_unmarked(service: Service) -> None:
    clock: ManualClock = service.clock  # type: ignore[assignment]
    model_id, _, key = uploaded(service, "old")
    cancel(service, model_id)
    clock.advance(31 * DAY)
    with pytest.raises(OSError):
        prune_images(service.db, FailingDelete(service.blobs), ImageRetention(), clock.now())  # type: ignore[arg-type]
    assert gone(service, model_id) is None and service.blobs.exists(key)


def test_a_backfill_finding_the_image_gone_fails_uncharged_and_marks_the_row(
    service: Service,
) -> None:
    model_id, job_id, key = uploaded(service, "m")
    score(service, job_id)
    service.blobs.delete(key)  # lost outside the policy
    added = upload(client(service), ROUNDS, rows(3), name="r2")
    [backfill] = added.get_json()["backfill_jobs"]
    worker = Worker(
        service.store, service.blobs, service.tasks,
        runtime_factory=factory_of(lambda spec: FakeModel(), []),
        heartbeat_s=0.05, poll_s=0.05, config_dir=service.config_dir,
    )  # fmt: skip
    stats = worker.work(burst=True)
    assert (stats.failed, stats.requeued) == (1, 0)  # never retried
    with service.db.session() as session:
        job = session.get(JobRow, backfill)
        assert job is not None and (job.status, job.failure_code) == ("failed", "image_gone")
    assert "no longer stored" in (gone(service, model_id) or "")
    assert service.plan_backfill("sentiment").skipped == {
        model_id: f"its image is gone: {gone(service, model_id)}"
    }
    page = create_app(service).test_client().get("/tasks/sentiment")
    assert "image gone: not run on new data" in page.get_data(as_text=True)
    with service.db.session() as session:
        assert session.scalars(select(JobRow).where(JobRow.status == "queued")).all() == []


def test_settings_and_the_cli(
    service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    toml = tmp_path / "dynaeval.toml"
    toml.write_text('keep_unscored_images_days = "7"\nkeep_scored_images_days = "never"\n')
    settings = load_settings(toml, environ={})
    assert settings.image_retention == ImageRetention(unscored_days=7, scored_days=None)
    env = {"DYNAEVAL_KEEP_SCORED_IMAGES_DAYS": "-1"}
    with pytest.raises(Exception, match="keep_scored_images_days"):
        load_settings(environ=env, cwd=tmp_path / "empty")

    monkeypatch.setenv("DYNAEVAL_DATA_DIR", str(tmp_path / "cli-data"))
    monkeypatch.setenv("DYNAEVAL_KEEP_UNSCORED_IMAGES_DAYS", "0")
    monkeypatch.chdir(tmp_path / "configs")  # no dynaeval.toml there
    cli_service = Service.open(tmp_path / "cli-data")
    model_id, _, key = uploaded(cli_service, "failed")
    cancel(cli_service, model_id)
    cli_service.close()
    assert main(["images", "prune", "--dry-run", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [i["model_id"] for i in listed["would_remove"]] == [model_id]
    assert main(["images", "prune"]) == 0
    out = capsys.readouterr().out
    assert f"removed the image of failed ({model_id})" in out and "removed 1 image(s)" in out
