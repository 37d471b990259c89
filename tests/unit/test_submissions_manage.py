"""Managing submissions: paged listing with a cursor (a fixed number of queries per page),
cancelling (API, store on both backends, a real Worker), status detail (step, queue place,
start estimate) and the full-results download."""

from __future__ import annotations

import csv
import io
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import event

from api.app import create_app
from client.sdk import ApiClientError, DynaevalClient
from configs.vocabulary.clock import ManualClock
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import JobStatus
from configs.vocabulary.results import EvaluationResult, Failure
from store.accounts import Accounts
from store.db import Database
from store.jobs import JobStore
from store.models import AttemptRow, JobRow
from store.queries import CursorError, Queries, parse_stage
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import AXES_A, DOCKER, assert_error, finished
from tests.unit.test_api_sdk import Live
from tests.unit.test_api_sdk import live as live  # noqa: F401  (the SDK's live server)
from tests.unit.test_worker import (
    BOUND_S,
    FAKE,
    Env,
    FakeModel,
    FakeRuntime,
    factory_of,
    real_tasks,  # noqa: F401  (a fixture the ``env`` fixture needs)
    small_task,  # noqa: F401
    wait_for,
)
from tests.unit.test_worker import env as env  # noqa: F401  (the worker test environment)
from usecases.service import Service


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = Service.open(tmp_path / "data", clock=ManualClock())
    yield svc
    svc.close()


def client_of(service: Service, name: str, role: str = "researcher") -> FlaskClient:
    return signed_in(create_app(service).test_client(), issue_token(service, name, role))


def owned_by(service: Service, name: str, model_id: str) -> str:
    user = Accounts(service.db).user_by_name(name)
    assert user is not None
    Accounts(service.db).set_model_owner(model_id, user["id"])
    return model_id


def queued(service: Service, owner: str, name: str) -> str:
    model_id, _ = service.store.submit("sentiment", name, DOCKER)
    return owned_by(service, owner, model_id)


# -- listing ---------------------------------------------------------------------------------
def test_pages_follow_the_cursor_through_every_submission_once(service: Service) -> None:
    admin = client_of(service, "admin", "admin")
    ids = [service.store.submit("sentiment", f"m{i}", DOCKER)[0] for i in range(7)]
    # Same clock instant for all seven: ties on created_at are broken by id.
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        query = "?limit=3" + (f"&cursor={cursor}" if cursor else "")
        body = admin.get(f"/api/v1/submissions{query}").get_json()
        seen += [s["id"] for s in body["submissions"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 7
    everything = admin.get("/api/v1/submissions").get_json()
    assert [s["id"] for s in everything["submissions"]] == seen  # the same order unpaged
    assert everything["next_cursor"] is None


def test_newest_first_across_pages(service: Service) -> None:
    admin = client_of(service, "admin", "admin")
    clock = service.clock
    assert isinstance(clock, ManualClock)
    ids = []
    for i in range(5):
        ids.append(service.store.submit("sentiment", f"m{i}", DOCKER)[0])
        clock.advance(1)
    first = admin.get("/api/v1/tasks/sentiment/submissions?limit=2").get_json()
    second = admin.get(
        f"/api/v1/tasks/sentiment/submissions?limit=2&cursor={first['next_cursor']}"
    ).get_json()
    shown = [s["id"] for s in first["submissions"] + second["submissions"]]
    assert shown == ids[::-1][:4]


def test_a_page_shows_only_what_the_caller_may_see(service: Service) -> None:
    alice = client_of(service, "alice")
    client_of(service, "bob")
    mine = [queued(service, "alice", f"a{i}") for i in range(3)]
    for i in range(3):
        queued(service, "bob", f"b{i}")
    first = alice.get("/api/v1/submissions?limit=2").get_json()
    rest = alice.get(f"/api/v1/submissions?limit=2&cursor={first['next_cursor']}").get_json()
    shown = [s["id"] for s in first["submissions"] + rest["submissions"]]
    assert sorted(shown) == sorted(mine) and rest["next_cursor"] is None


@pytest.mark.parametrize("cursor", ["nonsense", "W10", "eyJhIjoxfQ", "WyJ4IiwgMV0"])
def test_a_bad_cursor_is_a_400(service: Service, cursor: str) -> None:
    admin = client_of(service, "admin", "admin")
    assert_error(admin.get(f"/api/v1/submissions?cursor={cursor}"), 400, "bad_cursor")
    with pytest.raises(CursorError):
        Queries(service.db).submission_page(cursor=cursor)


def test_a_page_costs_the_same_queries_whatever_its_size(service: Service) -> None:
    """The old list read each submission (and its job and attempts) one by one."""
    for i in range(30):
        finished(service, f"m{i}", AXES_A)
    queries = Queries(service.db)

    def selects(limit: int) -> int:
        statements: list[str] = []

        def count(*args: Any) -> None:
            statements.append(args[2])

        event.listen(service.db.engine, "before_cursor_execute", count)
        try:
            page = queries.submission_page(limit=limit)
        finally:
            event.remove(service.db.engine, "before_cursor_execute", count)
        assert len(page.items) == limit
        assert all(item["results"] and item["job"]["attempt_history"] for item in page.items)
        return sum(1 for s in statements if s.lstrip().upper().startswith("SELECT"))

    assert selects(3) == selects(30) <= 4


def _selects(service: Service, **options: Any) -> tuple[int, list[dict[str, Any]]]:
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    event.listen(service.db.engine, "before_cursor_execute", count)
    try:
        page = Queries(service.db).submission_page(**options)
    finally:
        event.remove(service.db.engine, "before_cursor_execute", count)
    return sum(1 for s in statements if s.lstrip().upper().startswith("SELECT")), page.items


@pytest.mark.parametrize(
    ("fields", "reads"),
    [
        (["id", "name"], 1),
        (["name", "created_at", "image_gone"], 1),
        (["job"], 3),
        (["results"], 2),
        (["job", "results", "task"], 4),
    ],
)
def test_fields_choose_what_each_row_holds_and_which_reads_run(
    service: Service, fields: list[str], reads: int
) -> None:
    for i in range(5):
        finished(service, f"m{i}", AXES_A)
    count, items = _selects(service, limit=5, fields=fields)
    assert count == reads
    _, whole = _selects(service, limit=5)
    assert items == [{k: v for k, v in row.items() if k in {"id", *fields}} for row in whole]


def _statements(service: Service, **options: Any) -> list[str]:
    statements: list[str] = []

    def record(*args: Any) -> None:
        statements.append(args[2])

    event.listen(service.db.engine, "before_cursor_execute", record)
    try:
        Queries(service.db).submission_page(**options)
    finally:
        event.remove(service.db.engine, "before_cursor_execute", record)
    return statements


def test_a_page_reads_only_the_columns_its_fields_show(service: Service) -> None:
    """A list of a thousand decoded every job's spec and checkpoint, and every model's
    runtime when only names were asked for: most of its time."""
    for i in range(3):
        finished(service, f"m{i}", AXES_A)
    never = ("jobs.spec", "jobs.checkpoint", "jobs.lease_token", "job_attempts.lease_token")
    tables = {"jobs": JobRow.__table__, "job_attempts": AttemptRow.__table__}
    for name in never:  # a name that is no column would pass for ever
        table, column = name.split(".")
        assert column in tables[table].columns, name
    whole = " ".join(_statements(service, limit=3))
    assert "models.runtime" in whole and "jobs.status" in whole and "results.rounds" in whole
    assert not [column for column in never if column in whole]
    polled = " ".join(_statements(service, limit=3, fields=["name", "job"]))
    assert "models.name" in polled and "jobs.status" in polled and "attempts.outcome" in polled
    unread = ("models.runtime", "models.requirements", "models.image_gone", "results.")
    assert not [column for column in (*never, *unread) if column in polled]


def test_the_api_takes_fields_and_names_unknown_ones(service: Service) -> None:
    finished(service, "m", AXES_A)
    admin = client_of(service, "root", "admin")
    for url in ("/api/v1/submissions", "/api/v1/tasks/sentiment/submissions"):
        page = admin.get(f"{url}?fields=name,job").get_json()
        assert set(page["submissions"][0]) == {"id", "name", "job"}
        refused = admin.get(f"{url}?fields=name,password_hash")
        assert_error(refused, 422)
        assert "password_hash" in refused.get_data(as_text=True)


def test_the_list_keeps_each_submissions_fields(service: Service) -> None:
    model_id = finished(service, "m", AXES_A)
    listed = Queries(service.db).submissions()[0]
    alone = Queries(service.db).submission(model_id)
    assert listed == alone


# -- cancelling: the store, on both backends ---------------------------------------------------
@pytest.fixture
def store(database_url: str) -> Iterator[JobStore]:
    db = Database(database_url)
    job_store = JobStore(db, ManualClock())
    job_store.register_task("sentiment", 1, {})
    yield job_store
    db.dispose()


def job_row(store: JobStore, job_id: str) -> JobRow:
    with store.db.session() as session:
        row = session.get(JobRow, job_id)
        assert row is not None
        return row


def test_pages_on_both_backends(store: JobStore) -> None:
    clock = store.clock
    assert isinstance(clock, ManualClock)
    ids = []
    for i in range(5):
        ids.append(store.submit("sentiment", f"m{i}", FAKE)[0])
        if i % 2:  # pairs share an instant: the id breaks the tie
            clock.advance(0.5)
    queries = Queries(store.db)
    seen: list[str] = []
    cursor = None
    for _ in range(5):
        page = queries.submission_page(limit=2, cursor=cursor)
        seen += [item["id"] for item in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 5
    assert seen == [item["id"] for item in queries.submissions(limit=10)]


def test_a_queued_job_cancelled_never_runs(store: JobStore) -> None:
    model_id, job_id = store.submit("sentiment", "m", FAKE)
    outcome = store.cancel(model_id, "cancelled by alice")
    assert (outcome.job_id, outcome.status, outcome.cancelled) == (job_id, "queued", True)
    job = job_row(store, job_id)
    assert (job.status, job.failure_code, job.stage) == ("failed", "cancelled", "cancelled")
    assert job.finished_at == store.clock.now()
    assert store.claim("w", 60) is None
    again = store.cancel(model_id, "twice")
    assert (again.status, again.cancelled) == ("failed", False)


def test_a_running_job_cancelled_loses_its_lease(store: JobStore) -> None:
    model_id, job_id = store.submit("sentiment", "m", FAKE)
    claimed = store.claim("w", 60)
    assert claimed is not None and claimed.id == job_id
    assert store.cancel(model_id, "stop").status == "running"
    # the worker, its own token in hand, has lost the lease all the same
    assert not store.heartbeat(
        job_id, "w", 60, 0.5, "round r1 / test: original", lease=claimed.lease
    )
    late = EvaluationResult("sentiment", "done", summary={"performance": 1.0})
    # the worker's late result changes nothing
    assert not store.finish(job_id, "w", late, lease=claimed.lease)
    job = job_row(store, job_id)
    assert (job.status, job.failure_code, job.lease_owner) == ("failed", "cancelled", None)
    with store.db.session() as session:
        attempt = session.query(AttemptRow).filter_by(job_id=job_id).one()
        assert (attempt.outcome, attempt.failure_code) == ("cancelled", "cancelled")
    assert store.requeue_stalled(policy=_policy()) == []  # nothing left to recover


def test_a_finished_job_is_not_cancelled(store: JobStore) -> None:
    model_id, job_id = store.submit("sentiment", "m", FAKE)
    claimed = store.claim("w", 60)
    assert claimed is not None and claimed.id == job_id
    done = EvaluationResult("sentiment", "done", summary={})
    assert store.finish(job_id, "w", done, lease=claimed.lease)
    outcome = store.cancel(model_id, "late")
    assert (outcome.status, outcome.cancelled) == ("done", False)
    assert job_row(store, job_id).status == "done"


def test_a_model_without_a_job_has_nothing_to_cancel(store: JobStore) -> None:
    assert store.cancel("no-such-model", "x").job_id is None


def _policy() -> Any:
    from configs.vocabulary.jobs import DEFAULT_RETRY_POLICY

    return DEFAULT_RETRY_POLICY


def test_a_cancel_is_not_the_submitters_fault_and_is_never_retried() -> None:
    failure = Failure(FailureCode.CANCELLED, "cancelled by alice")
    assert not failure.user_caused
    assert not _policy().retries("cancelled")


# -- cancelling over the API ------------------------------------------------------------------
def test_the_submitter_cancels_a_queued_submission(service: Service) -> None:
    alice = client_of(service, "alice")
    model_id = queued(service, "alice", "m")
    response = alice.post(f"/api/v1/submissions/{model_id}/cancel")
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert (body["status"], body["was"]) == ("failed", "queued")
    job = alice.get(f"/api/v1/submissions/{model_id}").get_json()["job"]
    assert job["status"] == "failed" and job["failure"]["code"] == "cancelled"
    assert "alice" in job["failure"]["message"]
    assert_error(alice.post(f"/api/v1/submissions/{model_id}/cancel"), 409, "already_final")


def test_who_may_cancel(service: Service) -> None:
    alice, bob = client_of(service, "alice"), client_of(service, "bob")
    carol, admin = client_of(service, "carol"), client_of(service, "admin", "admin")
    reader = signed_in(
        create_app(service).test_client(), issue_token(service, "alice", scopes=["read"])
    )
    Accounts(service.db).set_task_access("sentiment", "carol", private=False)
    model_id = queued(service, "alice", "m")
    assert_error(bob.post(f"/api/v1/submissions/{model_id}/cancel"), 404, "unknown_submission")
    assert_error(reader.post(f"/api/v1/submissions/{model_id}/cancel"), 403)
    assert carol.post(f"/api/v1/submissions/{model_id}/cancel").status_code == 200
    other = queued(service, "alice", "n")
    assert admin.post(f"/api/v1/submissions/{other}/cancel").status_code == 200
    assert alice.get(f"/api/v1/submissions/{other}").get_json()["job"]["status"] == "failed"


def test_a_cancelled_submission_can_be_rerun(service: Service) -> None:
    admin = client_of(service, "admin", "admin")
    model_id, _ = service.store.submit("sentiment", "m", DOCKER)
    assert admin.post(f"/api/v1/submissions/{model_id}/cancel").status_code == 200
    service.clock.advance(1)  # type: ignore[attr-defined]  # the newest job is the later one
    assert admin.post(f"/api/v1/submissions/{model_id}/rerun").status_code == 201
    assert admin.get(f"/api/v1/submissions/{model_id}").get_json()["job"]["status"] == "queued"


# -- cancelling through a real worker ---------------------------------------------------------
def test_a_worker_stops_a_running_job_that_was_cancelled(
    env: Env,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = threading.Event()
    runtimes: list[FakeRuntime] = []
    model_id, job_id = env.store.submit("sentiment", "slow", FAKE)
    worker = env.worker(factory_of(lambda spec: FakeModel(gate=gate), runtimes))
    thread = threading.Thread(target=worker.work, kwargs={"burst": True}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: "round r1" in env.job(job_id).stage, "the job to run")
        assert env.store.cancel(model_id, "cancelled by alice").status == JobStatus.RUNNING
        # The worker flags the loss before logging it: from then on it stops at its next step.
        wait_for(lambda: "lost the lease" in caplog.text, "the heartbeat to notice")
    finally:
        gate.set()
        thread.join(BOUND_S)
    assert not thread.is_alive()
    assert (worker.stats.done, worker.stats.failed, worker.stats.requeued) == (0, 0, 0)
    job = env.job(job_id)
    assert (job.status, job.failure_code, job.attempts) == ("failed", "cancelled", 1)
    assert runtimes[0].stopped and runtimes[0].model.batches <= 3  # no profiling pass
    assert env.store.claim("another", 60) is None  # and nobody runs it again


def submitted_later(service: Service, name: str) -> str:
    """A submission a second after the previous one (the queue is in submission order)."""
    service.clock.advance(1)  # type: ignore[attr-defined]
    return service.store.submit("sentiment", name, DOCKER)[0]


# -- the SDK ---------------------------------------------------------------------------------
def test_the_sdk_follows_the_cursor_and_cancels(live: Live) -> None:  # noqa: F811
    client = DynaevalClient(live.url, api_key=live.api_key)
    runtime = {"kind": "docker", "image": "ghcr.io/team/yes:1", "protocol": "v1"}
    ids = {client.submit("toy", f"m{i}", runtime)["id"] for i in range(5)}
    assert {s["id"] for s in client.submissions(page_size=2)} == ids
    assert len(client.submissions(task="toy", page_size=3)) == 5
    victim = sorted(ids)[0]
    assert client.cancel(victim)["was"] == "queued"
    failure = client.submission(victim)["job"]["failure"]
    assert failure["code"] == "cancelled"
    with pytest.raises(ApiClientError) as caught:
        client.cancel(victim)
    assert (caught.value.status, caught.value.code) == (409, "already_final")


# -- status detail ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("stage", "step"),
    [
        ("round r2 / test: typo", ("scoring", "r2", "test", "typo")),
        ("round r1 / test: original", ("scoring", "r1", "test", "original")),
        ("profiling", ("profiling", None, None, None)),
        ("queued: rerun", ("queued", None, None, None)),
        ("retrying after platform_error", ("retrying after platform_error", None, None, None)),
        ("", (None, None, None, None)),
    ],
)
def test_the_stage_as_data(stage: str, step: tuple[str | None, ...]) -> None:
    parsed = parse_stage(stage)
    assert tuple(parsed[k] for k in ("phase", "round", "dataset", "variant")) == step


def test_a_queued_jobs_place_and_estimated_start(service: Service) -> None:
    admin = client_of(service, "admin", "admin")
    clock = service.clock
    assert isinstance(clock, ManualClock)
    store = service.store
    ids = [submitted_later(service, f"m{i}") for i in range(4)]

    def place(model_id: str) -> dict[str, Any]:
        job = admin.get(f"/api/v1/submissions/{model_id}").get_json()["job"]
        return job["queue"]

    assert place(ids[2]) == {
        "ahead": 2,
        "workers": 0,
        "median_run_s": None,
        "estimated_start": None,  # nothing finished, nobody working: unknown
        "capable_workers": None,  # it needs nothing: any worker runs it
    }
    # Two runs of 10 s and 30 s finish (median 20 s); then one worker takes the next job.
    for run_s in (10, 30):
        claimed = store.claim("w1", 600)
        assert claimed is not None
        clock.advance(run_s)
        done = EvaluationResult("sentiment", "done", summary={})
        assert store.finish(claimed.id, "w1", done, lease=claimed.lease)
    assert store.claim("w1", 600) is not None
    last = place(ids[3])
    assert (last["ahead"], last["workers"], last["median_run_s"]) == (0, 1, 20.0)
    expected = clock.now() + timedelta(seconds=20)
    assert datetime.fromisoformat(last["estimated_start"].rstrip("Z")) == expected
    assert store.claim("w2", 600) is not None  # a second worker: ids[3] is now running
    running = admin.get(f"/api/v1/submissions/{ids[3]}").get_json()["job"]
    assert running["queue"] is None and running["step"]["phase"] == "claimed"


def test_the_estimate_waits_for_workers_in_waves(service: Service) -> None:
    clock = service.clock
    assert isinstance(clock, ManualClock)
    store = service.store
    done = store.submit("sentiment", "done", DOCKER)[1]
    claimed = store.claim("w1", 600)
    assert claimed is not None and claimed.id == done
    clock.advance(60)
    result = EvaluationResult("sentiment", "done", summary={})
    assert store.finish(done, "w1", result, lease=claimed.lease)
    ids = [submitted_later(service, f"m{i}") for i in range(7)]
    assert store.claim("w1", 600) and store.claim("w2", 600)  # two live workers
    found = Queries(service.db).submission(ids[6], now=clock.now())
    assert found is not None
    queue = found["job"]["queue"]
    # 4 ahead, 2 workers: the 5th in line starts after ceil(5 / 2) = 3 runs of 60 s.
    assert (queue["ahead"], queue["workers"]) == (4, 2)
    start = datetime.fromisoformat(queue["estimated_start"].rstrip("Z"))
    assert start == clock.now() + timedelta(seconds=180)


def test_a_job_no_live_worker_can_run_gets_no_start_time(service: Service) -> None:
    """A GPU job, with only CPU workers alive, was given a start time whenever one of them
    was busy (outside tester): it says no live worker meets it, and gets none until one
    that does is seen."""
    from configs.vocabulary.capabilities import Capabilities, Requirements
    from store.presence import LIVE_WITHIN, WorkerPresence

    clock = service.clock
    assert isinstance(clock, ManualClock)
    store = service.store
    finished_before = store.submit("sentiment", "done", DOCKER)[1]
    claimed = store.claim("cpu", 600)
    assert claimed is not None and claimed.id == finished_before
    clock.advance(60)
    done = EvaluationResult("sentiment", "done", summary={})
    assert store.finish(claimed.id, "cpu", done, lease=claimed.lease)
    clock.advance(1)
    gpu_job = store.submit("sentiment", "g", DOCKER, requirements=Requirements(gpus=1))[0]
    busy = submitted_later(service, "busy")
    presence = WorkerPresence(service.db, clock)
    cpu_box = Capabilities(cpus=4, memory_gib=8.0)
    presence.seen("cpu", capabilities=cpu_box.to_dict())
    assert store.claim("cpu", 600, capabilities=cpu_box) is not None  # someone is busy

    def queue() -> dict[str, Any]:
        found = Queries(service.db).submission(gpu_job, now=clock.now())
        assert found is not None
        return dict(found["job"]["queue"])

    assert (queue()["capable_workers"], queue()["estimated_start"]) == (0, None)
    presence.seen("gpu", capabilities=Capabilities(cpus=8, memory_gib=32.0, gpus=1).to_dict())
    assert queue()["capable_workers"] == 1 and queue()["estimated_start"] is not None
    clock.advance(LIVE_WITHIN.total_seconds() + 1)  # the GPU worker went silent
    presence.seen("cpu", capabilities=cpu_box.to_dict())
    assert (queue()["capable_workers"], queue()["estimated_start"]) == (0, None)
    assert busy


# -- the full results as files -----------------------------------------------------------------
def test_full_results_download_as_json_and_csv(service: Service) -> None:
    alice = client_of(service, "alice")
    model_id = owned_by(service, "alice", finished(service, "m", AXES_A))
    response = alice.get(f"/api/v1/submissions/{model_id}/results/download?format=json")
    assert response.status_code == 200
    assert "attachment" in response.headers["Content-Disposition"]
    body = response.get_json()
    assert body["results"]["performance"] == AXES_A["performance"]
    assert body["results"]["rounds"][0]["round"] == "r1"
    assert body["scores"][0]["dataset_hash"] == "h" * 64
    response = alice.get(f"/api/v1/submissions/{model_id}/results/download")
    assert response.mimetype == "text/csv"
    rows = list(csv.DictReader(io.StringIO(response.get_data(as_text=True))))
    by_section = {(r["section"], r["round"], r["name"], r["metric"]): r["value"] for r in rows}
    assert float(by_section[("summary", "", "performance", "")]) == AXES_A["performance"]
    assert float(by_section[("round", "r1", "performance", "")]) == AXES_A["performance"]
    assert float(by_section[("score", "r1", "", "macro_f1")]) == AXES_A["performance"]
    assert {r["section"] for r in rows} == {"summary", "round", "score"}


def test_results_download_errors(service: Service) -> None:
    alice, bob = client_of(service, "alice"), client_of(service, "bob")
    model_id = owned_by(service, "alice", finished(service, "m", AXES_A))
    unscored = queued(service, "alice", "q")
    assert_error(bob.get(f"/api/v1/submissions/{model_id}/results/download"), 404)
    assert_error(alice.get(f"/api/v1/submissions/{unscored}/results/download"), 404)
    assert_error(alice.get(f"/api/v1/submissions/{model_id}/results/download?format=xml"), 422)
