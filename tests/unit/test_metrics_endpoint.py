"""``GET /metrics``: scraped and parsed with prometheus_client's own parser, the values
match a store seeded with known jobs; admins only; not in the OpenAPI document."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import update

from api.app import create_app
from configs.vocabulary.clock import ManualClock
from store.models import AttemptRow, JobRow
from store.presence import WorkerPresence, presence_ages
from store.stats import queue_stats
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import DOCKER
from usecases.service import Service

NOW = datetime(2026, 1, 1, 12, 0, 0)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = Service.open(tmp_path / "data", clock=ManualClock(NOW))
    yield svc
    svc.close()


def job(service: Service, name: str, **fields: Any) -> str:
    """A submission whose job row then gets ``fields``; its job id."""
    model_id, job_id = service.store.submit("sentiment", name, DOCKER)
    with service.db.session() as session, session.begin():
        session.execute(update(JobRow).where(JobRow.model_id == model_id).values(**fields))
    return str(job_id)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


@pytest.fixture
def seeded(service: Service) -> Service:
    """3 queued (one waiting out a back-off), 2 running on two workers, 2 done, 3 failed."""
    job(service, "q1", status="queued", available_at=ago(120))
    job(service, "q2", status="queued", available_at=ago(30))
    job(service, "q3", status="queued", available_at=NOW + timedelta(seconds=600))
    job(service, "r1", status="running", lease_owner="w-a", heartbeat_at=ago(2), started_at=ago(50))
    job(service, "r2", status="running", lease_owner="w-b", heartbeat_at=None, started_at=ago(40))
    job(service, "d1", status="done", started_at=ago(100), finished_at=ago(80))  # 20 s
    job(service, "d2", status="done", started_at=ago(700), finished_at=ago(200))  # 500 s
    for name, code in (("f1", "start_failed"), ("f2", "start_failed"), ("f3", "timeout")):
        job(
            service, name, status="failed", failure_code=code, started_at=ago(9), finished_at=ago(4)
        )
    # 37 attempts lost to dead workers on one job: the job shows once, the attempts 37 times
    lost = job(service, "lossy", status="queued", available_at=NOW + timedelta(seconds=60))
    with service.db.session() as session, session.begin():
        session.add_all(
            AttemptRow(
                job_id=lost, attempt=n, worker="w-x", lease_token=f"t{n}", started_at=ago(99),
                finished_at=ago(98), outcome="lost", failure_code="worker_lost",
            )
            for n in range(1, 38)
        )  # fmt: skip
    # an idle worker, seen 7 s ago, holds no job
    WorkerPresence(service.db, ManualClock(ago(7))).seen("w-idle")
    return service


def scrape(app: Flask, token: str) -> dict[str, dict[tuple, float]]:
    """``{sample name: {sorted label items: value}}``, parsed by prometheus_client."""
    response = signed_in(app.test_client(), token).get("/metrics")
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.content_type.startswith("text/plain")
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.get_data(as_text=True)):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def test_the_metrics_match_the_seeded_store(seeded: Service) -> None:
    samples = scrape(create_app(seeded), issue_token(seeded))
    jobs = {dict(k)["status"]: v for k, v in samples["dynaeval_jobs"].items()}
    assert jobs == {"queued": 4, "running": 2, "done": 2, "failed": 3}
    failed = {dict(k)["code"]: v for k, v in samples["dynaeval_failed_jobs"].items()}
    assert failed == {"start_failed": 2, "timeout": 1}
    assert samples["dynaeval_queue_depth"][()] == 4
    assert samples["dynaeval_queue_oldest_age_seconds"][()] == 120
    beats = {
        dict(k)["worker"]: v for k, v in samples["dynaeval_worker_heartbeat_age_seconds"].items()
    }
    # no heartbeat yet: since the job started; an idle worker is listed too
    assert beats == {"w-a": 2, "w-b": 40, "w-idle": 7}
    attempts = samples["dynaeval_job_attempts_total"]
    assert attempts[(("code", "worker_lost"), ("outcome", "lost"))] == 37
    buckets = samples["dynaeval_job_duration_seconds_bucket"]
    assert buckets[(("le", "30.0"), ("status", "done"))] == 1
    assert buckets[(("le", "600.0"), ("status", "done"))] == 2
    assert buckets[(("le", "+Inf"), ("status", "done"))] == 2
    assert buckets[(("le", "10.0"), ("status", "failed"))] == 3
    total = {dict(k)["status"]: v for k, v in samples["dynaeval_job_duration_seconds_sum"].items()}
    assert total == {"done": 520, "failed": 15}
    count = samples["dynaeval_job_duration_seconds_count"]
    assert count[(("status", "done"),)] == 2
    assert "process_resident_memory_bytes" in samples  # the API process itself


def test_each_tasks_queue_depth_and_oldest_wait(seeded: Service) -> None:
    """Per task: the depth counts jobs waiting out a back-off, the oldest wait does not."""
    nli = job(seeded, "n1", status="queued", available_at=ago(300))
    assert nli
    job(seeded, "n2", status="running", lease_owner="w-c", started_at=ago(5))
    with seeded.db.session() as session, session.begin():
        session.execute(update(JobRow).where(JobRow.id == nli).values(task="nli"))
    samples = scrape(create_app(seeded), issue_token(seeded))
    depth = {dict(k)["task"]: v for k, v in samples["dynaeval_task_queue_depth"].items()}
    busy = {"sentiment": 4, "nli": 1}
    assert depth == busy | {t: 0 for t in seeded.tasks if t not in busy}
    assert set(depth) == set(seeded.tasks)  # an idle task is listed at 0
    oldest = {
        dict(k)["task"]: v for k, v in samples["dynaeval_task_queue_oldest_age_seconds"].items()
    }
    assert {t: v for t, v in oldest.items() if v} == {"sentiment": 120, "nli": 300}
    browser = create_app(seeded).test_client()
    page = browser.get("/", headers={"Accept": "text/html"}).get_data(as_text=True)
    row = page.split('data-task="sentiment"', 1)[1].split("</tr>", 1)[0]
    assert "queued: 4, running: 3<br>oldest waiting 2 min" in row
    later = job(seeded, "h1", status="queued", available_at=NOW + timedelta(seconds=60))
    with seeded.db.session() as session, session.begin():
        session.execute(update(JobRow).where(JobRow.id == later).values(task="hate_speech"))
    page = browser.get("/", headers={"Accept": "text/html"}).get_data(as_text=True)
    row = page.split('data-task="hate_speech"', 1)[1].split("</tr>", 1)[0]
    assert "queued: 1, running: 0" in row and "oldest waiting" not in row  # a back-off only
    listed = {t["name"]: t["queue"] for t in browser.get("/api/v1/tasks").get_json()["tasks"]}
    assert listed["sentiment"] == {"queued": 4, "running": 3, "oldest_wait_s": 120.0}
    assert listed["nli"] == {"queued": 1, "running": 0, "oldest_wait_s": 300.0}
    assert listed["qa"] == {"queued": 0, "running": 0, "oldest_wait_s": 0.0}


def test_an_empty_store(service: Service) -> None:
    samples = scrape(create_app(service), issue_token(service))
    assert samples["dynaeval_queue_depth"][()] == 0
    assert samples["dynaeval_queue_oldest_age_seconds"][()] == 0
    assert set(samples["dynaeval_jobs"].values()) == {0}


def test_only_admins_scrape(service: Service) -> None:
    app = create_app(service)
    assert app.test_client().get("/metrics").status_code == 401
    researcher = issue_token(service, "rita", "researcher")
    assert signed_in(app.test_client(), researcher).get("/metrics").status_code == 403
    spec = signed_in(app.test_client(), issue_token(service)).get("/api/v1/openapi.json")
    assert "/metrics" not in spec.get_json()["paths"]


def test_the_stats_take_few_queries_on_many_jobs(service: Service) -> None:
    """10,000 jobs: a handful of aggregate queries, whatever the number of rows."""
    from sqlalchemy import event

    model_id, _ = service.store.submit("sentiment", "many", DOCKER)
    rows = [
        {
            "id": f"job-{i}",
            "model_id": model_id,
            "task": "sentiment",
            "status": ("queued", "running", "done", "failed")[i % 4],
            "available_at": ago(i % 500),
            "created_at": ago(i % 500),
            "started_at": ago(1000),
            "finished_at": ago(i % 900) if i % 4 >= 2 else None,
            "lease_owner": f"w-{i % 7}" if i % 4 == 1 else None,
            "failure_code": "timeout" if i % 4 == 3 else None,
        }
        for i in range(10_000)
    ]
    with service.db.session() as session, session.begin():
        session.execute(JobRow.__table__.insert(), rows)
    statements: list[str] = []
    event.listen(service.db.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    stats = queue_stats(service.db, NOW)
    assert len(statements) <= 7  # a fixed number, however many jobs (one per figure)
    assert stats.queued == 2501 and stats.failures_by_code == {"timeout": 2500}
    assert len(stats.heartbeat_age_s) == 7
    assert {s: d.count for s, d in stats.durations.items()} == {"done": 2500, "failed": 2500}


def test_every_metric_parses_as_the_type_it_declares(seeded: Service) -> None:
    """The duration histogram was a gauge histogram declared as a histogram; the lost
    attempts had no counter at all."""
    response = signed_in(create_app(seeded).test_client(), issue_token(seeded)).get("/metrics")
    types = {
        family.name: family.type
        for family in text_string_to_metric_families(response.get_data(as_text=True))
        if family.name.startswith("dynaeval_")
    }
    assert types == {
        "dynaeval_jobs": "gauge",
        "dynaeval_failed_jobs": "gauge",
        "dynaeval_queue_depth": "gauge",
        "dynaeval_queue_oldest_age_seconds": "gauge",
        "dynaeval_task_queue_depth": "gauge",
        "dynaeval_task_queue_oldest_age_seconds": "gauge",
        "dynaeval_worker_heartbeat_age_seconds": "gauge",
        "dynaeval_job_attempts": "counter",
        "dynaeval_job_duration_seconds": "histogram",
    }


def test_a_worker_is_present_while_it_runs_and_gone_after_a_clean_stop(
    service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from store.blobs import LocalBlobStore
    from worker.worker import Worker

    monkeypatch.setenv("DYNAEVAL_LOCK_DIR", str(tmp_path / "locks"))
    worker = Worker(service.store, LocalBlobStore(tmp_path / "blobs"), {}, worker_id="w-p")
    seen: list[set[str]] = []
    original = worker._next_job

    def spy() -> Any:  # what /metrics would list while the idle worker polls
        seen.append(set(presence_ages(service.db, service.clock.now())))
        return original()

    monkeypatch.setattr(worker, "_next_job", spy)
    worker.work(burst=True)
    assert seen and all("w-p" in names for names in seen)
    assert "w-p" not in presence_ages(service.db, service.clock.now())


def test_durations_and_attempts_on_each_backend(database_url: str) -> None:
    """The histogram's seconds come from each database's own date arithmetic."""
    from store.db import Database
    from store.jobs import JobStore

    db = Database(database_url)
    try:
        store = JobStore(db, ManualClock(NOW))
        store.register_task("sentiment", 1, {})
        model_id, _ = store.submit("sentiment", "m", DOCKER)
        with db.session() as session, session.begin():
            session.execute(
                update(JobRow)
                .where(JobRow.model_id == model_id)
                .values(status="done", started_at=ago(90), finished_at=ago(60))
            )
        stats = queue_stats(db, NOW)
        done = stats.durations["done"]
        assert (done.count, done.total_s) == (1, 30.0)
        assert dict(zip((10.0, 30.0, 60.0), done.buckets[:3], strict=True)) == {
            10.0: 0,
            30.0: 1,
            60.0: 1,
        }
    finally:
        db.dispose()
