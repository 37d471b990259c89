"""Fair claiming on both backends: one submitter's flood of queued jobs does not hold back
another's few, one task's flood does not hold back another task, and backfills stay below
fresh submissions. Time is a ManualClock; a "job" runs for ``JOB`` of it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from configs.vocabulary.clock import ManualClock
from store.accounts import Accounts
from store.backfill import BACKFILL_PRIORITY
from store.claims import FAIR_SHARE_WINDOW
from store.db import Database
from store.jobs import JobStore
from store.queries import Queries
from tests.unit.test_store import RUNTIME, result

JOB = 120.0  # seconds
JOB_WAIT = timedelta(minutes=5)


@pytest.fixture
def world(database_url: str) -> Iterator[tuple[JobStore, ManualClock, dict[str, str]]]:
    db = Database(database_url)
    clock = ManualClock()
    store = JobStore(db, clock)
    for task in ("sentiment", "nli"):
        store.register_task(task, 1, {"name": task})
    users = {n: Accounts(db, clock).add_user(n, "researcher")["id"] for n in ("flood", "few")}
    yield store, clock, users
    db.dispose()


def submit(store: JobStore, owner: str, n: int, task: str = "sentiment") -> list[str]:
    return [store.submit(task, f"m{i}", RUNTIME, owner_id=owner)[1] for i in range(n)]


def run_next(store: JobStore, clock: ManualClock, worker: str = "w") -> str:
    """Claim the next job, run it for one job-length and finish it; its id."""
    claimed = store.claim(worker, 600)
    assert claimed is not None
    clock.advance(JOB)
    assert store.finish(claimed.id, worker, result(), lease=claimed.lease)
    return claimed.id


def test_a_second_submitters_jobs_start_within_one_job_length(
    world: tuple[JobStore, ManualClock, dict[str, str]],
) -> None:
    store, clock, users = world
    flood = submit(store, users["flood"], 200)
    for _ in range(3):  # the flood has the worker to itself for a while
        assert run_next(store, clock) in flood
    clock.advance(30)
    few = submit(store, users["few"], 2)
    started = [run_next(store, clock), run_next(store, clock)]
    assert started == few  # each within one job-length of the other's start
    assert run_next(store, clock) in flood  # and then the flood goes on


def test_with_two_workers_both_of_the_few_start_at_the_next_two_claims(
    world: tuple[JobStore, ManualClock, dict[str, str]],
) -> None:
    store, clock, users = world
    flood = submit(store, users["flood"], 50)
    running = [store.claim("a", 600), store.claim("b", 600)]
    assert all(c is not None and c.id in flood for c in running)
    few = submit(store, users["few"], 2)
    clock.advance(JOB)
    for claimed, worker in zip(running, ("a", "b"), strict=True):
        assert claimed is not None
        assert store.finish(claimed.id, worker, result(), lease=claimed.lease)
    assert {store.claim("a", 600).id, store.claim("b", 600).id} == set(few)  # type: ignore[union-attr]


def test_shares_alternate_between_two_busy_submitters(
    world: tuple[JobStore, ManualClock, dict[str, str]],
) -> None:
    store, clock, users = world
    flood = set(submit(store, users["flood"], 20))
    submit(store, users["few"], 20)
    order = [run_next(store, clock) for _ in range(10)]
    owners = ["flood" if job in flood else "few" for job in order]
    assert owners.count("flood") == owners.count("few") == 5
    assert all(a != b for a, b in zip(owners, owners[1:], strict=False))


def test_old_history_stops_counting_after_the_window(
    world: tuple[JobStore, ManualClock, dict[str, str]],
) -> None:
    store, clock, users = world
    submit(store, users["flood"], 3)
    for _ in range(3):
        run_next(store, clock)
    clock.advance(FAIR_SHARE_WINDOW.total_seconds())
    later = submit(store, users["flood"], 1)
    other = submit(store, users["few"], 1)
    clock.advance(1)
    assert run_next(store, clock) == later[0]  # equal shares again: the oldest first
    assert run_next(store, clock) == other[0]


def test_one_tasks_flood_does_not_hold_back_another_task(
    world: tuple[JobStore, ManualClock, dict[str, str]],
) -> None:
    store, clock, users = world
    sentiment = submit(store, users["flood"], 30, task="sentiment")
    run_next(store, clock)
    nli = submit(store, users["flood"], 1, task="nli")
    assert run_next(store, clock) == nli[0]
    assert run_next(store, clock) in sentiment


def test_backfills_stay_below_fresh_submissions_whatever_the_shares(
    world: tuple[JobStore, ManualClock, dict[str, str]],
) -> None:
    store, clock, users = world
    model_id, _ = store.submit("sentiment", "old", RUNTIME, owner_id=users["few"])
    run_next(store, clock)
    backfill = store.enqueue(model_id, priority=BACKFILL_PRIORITY)
    fresh = submit(store, users["flood"], 3)
    for _ in range(2):
        run_next(store, clock)
    assert run_next(store, clock) in fresh
    assert run_next(store, clock) == backfill


def test_a_jobs_place_in_the_queue_is_the_claim_order(
    world: tuple[JobStore, ManualClock, dict[str, str]],
) -> None:
    """``ahead`` counts the jobs claims would take first as the shares stand: the second
    submitter's jobs are first and second in line, not behind the whole flood."""
    store, clock, users = world

    def one_by_one(owner: str, n: int) -> list[str]:  # a claim order even among equals
        made = []
        for _ in range(n):
            clock.advance(1)
            made += submit(store, owner, 1)
        return made

    flood = one_by_one(users["flood"], 8)
    for _ in range(3):
        run_next(store, clock)
    few = one_by_one(users["few"], 2)
    queries = Queries(store.db)

    def ahead(job_id: str) -> int:
        model_id = next(m for m, j in jobs(store) if j == job_id)
        found = queries.submission(model_id, now=clock.now())
        assert found is not None
        return int(found["job"]["queue"]["ahead"])

    queued = flood[3:] + few
    places = {job_id: ahead(job_id) for job_id in queued}
    assert places[few[0]] == 0 and places[few[1]] == 1
    assert sorted(places.values()) == list(range(len(queued)))  # a strict order, no ties
    claimed = []
    while (job := store.claim("w", 600)) is not None:
        claimed.append(job.id)
    assert claimed == sorted(queued, key=places.__getitem__)


def jobs(store: JobStore) -> list[tuple[str, str]]:
    from sqlalchemy import select

    from store.models import JobRow

    with store.db.session() as session:
        return [(m, j) for m, j in session.execute(select(JobRow.model_id, JobRow.id))]


def test_a_claim_in_progress_does_not_hide_the_next_fair_job_from_another(
    world: tuple[JobStore, ManualClock, dict[str, str]],
) -> None:
    """Two workers claiming at once: the one that comes second takes the next job in fair
    order, not one behind every job the first is looking at (on PostgreSQL a claim locks
    the candidates it looks at, and the other claimer skips locked rows)."""
    from store.claims import claimable

    store, clock, users = world
    flood = submit(store, users["flood"], 60)
    for _ in range(3):
        assert run_next(store, clock) in flood
    few = submit(store, users["few"], 2)
    with store.db.engine.begin() as connection:  # a claim in progress
        found = claimable(connection, clock.now())
        assert found is not None and found.id == few[0]
        second = store.claim("w2", 600)  # meanwhile another worker claims
    # SQLite locks no rows: the same candidate (the first claim's update would then miss
    # and take the next); PostgreSQL: the next one, not one behind the first's candidates
    assert second is not None and second.id in few


def test_a_claim_is_one_round_trip_on_postgresql_and_three_statements_on_sqlite(
    world: tuple[JobStore, ManualClock, dict[str, str]],
) -> None:
    """A claim finds its job, takes it and opens its attempt: on PostgreSQL in one statement
    when the model needs nothing of the worker, sent in autocommit (no BEGIN and COMMIT
    round trips around it); on SQLite in three within a transaction (no loading of the job
    and its model again); and the next claim sends the very same SQL (built once)."""
    from sqlalchemy import event

    store, _clock, users = world
    sent: list[tuple[str, bool]] = []

    def record(conn: Any, _cursor: object, statement: str, *_args: object) -> None:
        if statement.strip().upper() != "SELECT 1":  # the pool's ping of a connection
            autocommit = getattr(conn.connection.dbapi_connection, "autocommit", None)
            sent.append((statement, autocommit is True))

    submit(store, users["flood"], 30)
    event.listen(store.db.statements, "before_cursor_execute", record)
    try:
        first = store.claim("w1", 600)
        once = list(sent)
        second = store.claim("w2", 600)
    finally:
        event.remove(store.db.statements, "before_cursor_execute", record)
    assert first is not None and second is not None and first.id != second.id
    assert first.runtime == RUNTIME and first.attempt == 1
    postgres = store.db.engine.dialect.name == "postgresql"
    assert len(once) == (1 if postgres else 3), once
    assert all(autocommit == postgres for _, autocommit in sent), sent
    assert sent[len(once) :] == once


@pytest.fixture
def postgres_world(postgres_cluster: Any, postgres_template: str) -> Iterator[tuple[JobStore, str]]:
    """A job store on a fresh PostgreSQL database, and a submitter."""
    with postgres_cluster.fresh_database(postgres_template) as url:
        db = Database(url)
        store = JobStore(db, ManualClock())
        store.register_task("sentiment", 1, {"name": "sentiment"})
        owner = Accounts(db).add_user("flood", "researcher")["id"]
        yield store, owner
        db.dispose()


def test_sqlite_claims_in_one_transaction_on_its_one_engine(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'store.sqlite3'}")
    try:
        assert db.statements is db.engine
    finally:
        db.dispose()


def test_a_claim_on_postgresql_is_planned_once_and_reads_jobs_through_indexes(
    postgres_world: tuple[JobStore, str],
) -> None:
    """The claim's connections prepare it at the first claim and keep its generic plan
    (PostgreSQL planned the fair-order query afresh at every claim, longer than running
    it). A generic plan cannot see the window's start: written with it open-ended and the
    statuses bound, the plan read all 200,000 jobs of a long history at every claim (29 ms
    against 1.7 ms). With 20,000 finished jobs, no claim reads the jobs table whole."""
    from sqlalchemy import text

    store, owner = postgres_world
    submit(store, owner, 8)
    with store.db.engine.begin() as connection:  # a long history: copies of the queued jobs
        columns = (
            connection.execute(
                text("SELECT column_name FROM information_schema.columns WHERE table_name = 'jobs'")
            )
            .scalars()
            .all()
        )
        made = {
            "id": "gen_random_uuid()::text",
            "status": "'done'",
            "started_at": "now() - (g % 720) * interval '1 hour'",
        }
        values = ", ".join(made.get(column, column) for column in columns)
        connection.execute(
            text(
                f"INSERT INTO jobs ({', '.join(columns)}) SELECT {values}"
                " FROM jobs, generate_series(1, 2500) AS g WHERE status = 'queued'"
            )
        )
        connection.execute(text("ANALYZE jobs"))
    with store.db.statements.connect() as connection:
        before = _scans(connection)
        for _ in range(6):  # one after another: the pool lends this one connection
            assert store.claim("w1", 600) is not None
        assert connection.execute(text("SHOW plan_cache_mode")).scalar_one() == (
            "force_generic_plan"
        )
    with store.db.statements.connect() as connection:
        executions = connection.execute(
            text(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE statement LIKE '%FOR UPDATE OF jobs SKIP LOCKED%'"
                " AND statement NOT LIKE '%pg_prepared_statements%'"  # this query's own
            )
        ).all()
        connection.execute(text("SELECT pg_stat_force_next_flush()"))
    assert [tuple(row) for row in executions] == [(6, 0)], executions
    with store.db.engine.connect() as connection:  # another session: this one flushed
        after = _scans(connection)
    assert after == before, "a claim read the whole jobs table"


def _scans(connection: Any) -> int:
    """Whole-table reads of jobs so far (PostgreSQL's statistics)."""
    from sqlalchemy import text

    found = connection.execute(
        text("SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'jobs'")
    ).scalar_one()
    return int(found)


def test_a_take_misses_a_job_put_back_with_a_wait_since_it_was_found(
    world: tuple[JobStore, ManualClock, dict[str, str]],
) -> None:
    """Between finding a job and taking it (two statements), the job may be put back with a
    wait (a retry's back-off): the take must not start it early."""
    from sqlalchemy import update

    from store.claims import take
    from store.models import JobRow

    store, clock, users = world
    (job_id,) = submit(store, users["flood"], 1)
    later = clock.now() + JOB_WAIT
    with store.db.engine.begin() as connection:
        connection.execute(update(JobRow).where(JobRow.id == job_id).values(available_at=later))
        values = {"worker": "w", "token": "t", "domain": None, "now": clock.now()}
        values |= {"heartbeat_at": clock.now(), "lease_expires_at": later, "job": job_id}
        assert take(connection, values) is None
    assert store.claim("w", 600) is None
    clock.advance(JOB_WAIT.total_seconds())
    claimed = store.claim("w", 600)
    assert claimed is not None and claimed.id == job_id


def test_a_claim_after_the_server_closed_its_connections_still_claims(
    postgres_world: tuple[JobStore, str],
) -> None:
    """The claim's pool does not ping a connection before lending it (a round trip per
    claim): when PostgreSQL closed the pooled connections (a restart, a fail-over), the
    claim retries once on a fresh one instead of failing as an outage."""
    from sqlalchemy import create_engine, text

    store, owner = postgres_world
    submit(store, owner, 3)
    assert store.claim("w1", 600) is not None  # the pool now holds a connection
    admin = create_engine(store.db.url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            closed = connection.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            ).scalar_one()
    finally:
        admin.dispose()
    assert closed >= 1
    second = store.claim("w2", 600)
    assert second is not None and second.attempt == 1
