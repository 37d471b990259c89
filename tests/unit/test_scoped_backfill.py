"""A backfill is scoped to the new data: a model scored on r1 is sent only r2's examples when
r2 is added, and its result stays whole (r1's scores, slices, predictions and profile kept,
the aggregate interval still computed). A model without stored predictions is scored again
in full, and a model whose image is gone gets no job, said so, and keeps its scores."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from sqlalchemy import select

from configs.vocabulary.clock import ManualClock
from configs.vocabulary.jobs import BackfillScope
from store.accounts import Accounts
from store.backfill import BACKFILL_PRIORITY, newest_result
from store.models import JobRow, ModelRow, ScoreRow
from store.rules.backfill import stale_sets
from tests.unit.auth_helpers import issue_token
from tests.unit.test_rounds_api import FAKE, ROUNDS, client, rows, upload
from tests.unit.test_task_catalog import small_config
from tests.unit.test_worker import FakeModel, FakeRuntime, factory_of
from usecases.service import Service
from worker.predictions import load_predictions
from worker.worker import Worker


class RecordingModel(FakeModel):
    """A FakeModel (protocol v1, always "positive") that keeps every statement it is sent."""

    def __init__(self, seen: list[str]) -> None:
        super().__init__("positive")
        self.seen = seen

    def handler(self) -> type[BaseHTTPRequestHandler]:
        seen = self.seen

        class Recording(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, body: dict[str, object]) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send({"status": "ok"})

            def do_POST(self) -> None:
                instances = json.loads(self.rfile.read(int(self.headers["Content-Length"])))[
                    "instances"
                ]
                seen.extend(i["statement"] for i in instances)
                self._send(
                    {"predictions": [{"uid": i["uid"], "label": "positive"} for i in instances]}
                )

        return Recording


@dataclass
class Board:
    service: Service
    seen: list[str] = field(default_factory=list)
    runtimes: list[FakeRuntime] = field(default_factory=list)

    def worker(self) -> Worker:
        return Worker(
            self.service.store, self.service.blobs, self.service.tasks,
            runtime_factory=factory_of(lambda spec: RecordingModel(self.seen), self.runtimes),
            heartbeat_s=0.05, poll_s=0.05, config_dir=self.service.config_dir,
        )  # fmt: skip


@pytest.fixture
def board(tmp_path: Path) -> Iterator[Board]:
    config_dir = small_config(tmp_path / "configs")
    service = Service.open(tmp_path / "data", config_dir=config_dir, clock=ManualClock())
    issue_token(service, "carol", "researcher")
    Accounts(service.db, service.clock).set_task_access("sentiment", "carol", private=False)
    try:
        yield Board(service)
    finally:
        service.close()


def scores_of(service: Service, model_id: str) -> dict[tuple[str, str], int]:
    """How many score rows the model's newest result has per (round, dataset hash)."""
    newest = newest_result(service.db, model_id)
    assert newest is not None
    job_id = newest.job_id
    counts: dict[tuple[str, str], int] = {}
    with service.db.session() as session:
        for row in session.scalars(select(ScoreRow).where(ScoreRow.job_id == job_id)):
            counts[(row.round, row.dataset_hash)] = counts.get((row.round, row.dataset_hash), 0) + 1
    return counts


def test_a_backfill_sends_only_the_new_set_and_keeps_the_rest(board: Board) -> None:
    service = board.service
    model_id, _ = service.store.submit("sentiment", "m", FAKE)
    assert board.worker().work(burst=True).done == 1
    full = service.queries.submission(model_id)["results"]
    r1_sent = len(board.seen)
    assert r1_sent > 20  # 20 examples and the profiling passes
    before = scores_of(service, model_id)
    base_job = newest_result(service.db, model_id).job_id  # type: ignore[union-attr]

    added = upload(client(service), ROUNDS, rows(7), name="r2")
    assert added.status_code == 201, added.get_json()
    [job_id] = added.get_json()["backfill_jobs"]
    with service.db.session() as session:
        job = session.get(JobRow, job_id)
        assert job is not None and job.priority == BACKFILL_PRIORITY
        scope = BackfillScope.of(job.spec)
    r2_hash = service.dataset_hashes("sentiment")["r2/test"]
    assert scope == BackfillScope((("r2", "test", r2_hash),))

    board.seen.clear()
    service.clock.advance(60)  # type: ignore[attr-defined]  # results are ordered by time
    assert board.worker().work(burst=True).done == 1
    assert sorted(board.seen) == sorted(f"statement {i}" for i in range(7))  # r2 only, once

    result = service.queries.submission(model_id)["results"]
    assert [r["round"] for r in result["rounds"]] == ["r1", "r2"]
    assert result["provenance"]["backfill"] == {
        "base_job": base_job, "kept": ["r1/test"], "scored": ["r2/test"],
    }  # fmt: skip
    assert result["profile"]["throughput"] == full["profile"]["throughput"]  # not re-measured
    assert result["performance_ci"] is not None  # r1's replicates came back from predictions
    after = scores_of(service, model_id)
    r1_hash = service.dataset_hashes("sentiment")["r1/test"]
    assert after[("r1", r1_hash)] == before[("r1", r1_hash)]  # carried whole
    assert after[("r2", r2_hash)] > 0
    kept = load_predictions(service.blobs, model_id)
    assert kept is not None
    assert sorted((s["round"], len(s["uids"])) for s in kept["sets"]) == [("r1", 20), ("r2", 7)]
    assert service.rescore_stale(["sentiment"]) == []  # nothing left: idempotent


def test_without_stored_predictions_the_backfill_scores_everything(board: Board) -> None:
    service = board.service
    model_id, _ = service.store.submit("sentiment", "m", FAKE)
    assert board.worker().work(burst=True).done == 1
    service.blobs.delete(f"predictions/{model_id}.json")
    upload(client(service), ROUNDS, rows(3), name="r2")
    board.seen.clear()
    service.clock.advance(60)  # type: ignore[attr-defined]
    assert board.worker().work(burst=True).done == 1
    sent = set(board.seen)
    assert {f"statement {i}" for i in range(3)} <= sent and len(sent) > 3  # r1 sent again
    backfill = service.queries.submission(model_id)["results"]["provenance"]["backfill"]
    assert backfill["kept"] == [] and backfill["scored"] == ["r1/test", "r2/test"]


def test_a_model_whose_image_is_gone_is_skipped_and_said_so(board: Board) -> None:
    service = board.service
    kept_id, _ = service.store.submit("sentiment", "kept", FAKE)
    gone_id, _ = service.store.submit("sentiment", "gone", FAKE)
    assert board.worker().work(burst=True).done == 2
    with service.db.session() as session, session.begin():
        row = session.get(ModelRow, gone_id)
        assert row is not None
        row.image_gone, row.image_gone_at = "removed by retention", service.clock.now()
    upload(client(service), ROUNDS, rows(3), name="r2")
    plan = service.plan_backfill("sentiment")  # the upload queued "kept" already
    assert plan.jobs == () and plan.skipped == {gone_id: "its image is gone: removed by retention"}
    with service.db.session() as session:
        queued = set(session.scalars(select(JobRow.model_id).where(JobRow.status == "queued")))
    assert queued == {kept_id}
    assert scores_of(service, gone_id)  # its r1 scores stay


def test_stale_sets_name_every_changed_or_new_version() -> None:
    scored_on = {"r1/test": "a", "r2/test": "b"}
    current = {"r1/test": "a", "r2/test": "c", "r3/extra": "d"}
    assert stale_sets(scored_on, current).sets == (("r2", "test", "c"), ("r3", "extra", "d"))
    assert stale_sets(current, current).sets == ()
