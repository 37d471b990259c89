"""The order in which workers claim queued jobs, shared by the claim itself and by the
queue place a submission shows (``ahead``), so the two never disagree.

Best first: the highest priority (fresh submissions above backfills); then fair shares,
the submitter who has started the fewest jobs in the last ``FAIR_SHARE_WINDOW`` (running
ones counted however old), then the task that has; then the oldest available, then the
oldest made. One submitter's flood of 200 jobs thus cannot hold back another's 2, nor one
task's flood the other tasks. Counting running jobs alone would not do: with one worker
every submitter has at most one, and the flood's older jobs would keep winning.

The claim's own statements are built once per process with bound parameters (``now``,
``since``, ``gpus``): a claim then costs its round trips, not the building of a query with
two grouped subqueries, which with several claimers in one process held the GIL longer than
the database took to answer."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Connection,
    DateTime,
    FromClause,
    Integer,
    Select,
    String,
    Update,
    and_,
    bindparam,
    false,
    func,
    insert,
    literal_column,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.sql.dml import Insert

from configs.vocabulary.capabilities import Capabilities, Requirements
from configs.vocabulary.jobs import JobStatus
from configs.vocabulary.runtimes import StoredRuntime
from store.models import AttemptRow, JobRow, ModelRow

FAIR_SHARE_WINDOW = timedelta(hours=1)  # how far back the jobs a submitter started count


def claim_order(now: datetime) -> tuple[FromClause, tuple[ColumnElement[Any], ...]]:
    """Jobs joined to their model and to the fair-share counts at ``now``, and the keys a
    claim sorts them by, each ascending (best first)."""
    return _order(now - FAIR_SHARE_WINDOW, now)


def _order(since: Any, until: Any) -> tuple[FromClause, tuple[ColumnElement[Any], ...]]:
    """claim_order with the fair-share window from ``since`` to ``until`` (times or bound
    parameters). Closed at both ends and with the statuses written into the SQL, so that a
    plan made without the parameters' values (a prepared statement's generic plan) still
    expects few rows and reads them through the indexes: with ``since`` alone PostgreSQL
    would guess a third of every job ever run."""
    # One pass over the recent jobs (an index on started_at finds them, however long the
    # history), grouped by submitter and task; the two counts are sums over those groups.
    owner = func.coalesce(ModelRow.owner_id, "")
    recent = (
        select(owner.label("owner"), JobRow.task.label("task"), func.count().label("started"))
        .select_from(JobRow)
        .outerjoin(ModelRow, ModelRow.id == JobRow.model_id)
        .where(
            or_(
                and_(JobRow.started_at >= since, JobRow.started_at <= until),
                JobRow.status == _written(JobStatus.RUNNING),
            )
        )
        .group_by(owner, JobRow.task)
        .cte("recent")
    )
    by_owner = (
        select(recent.c.owner, func.sum(recent.c.started).label("started"))
        .group_by(recent.c.owner)
        .subquery()
    )
    by_task = (
        select(recent.c.task, func.sum(recent.c.started).label("started"))
        .group_by(recent.c.task)
        .subquery()
    )
    joined = (
        JobRow.__table__.outerjoin(ModelRow, ModelRow.id == JobRow.model_id)
        .outerjoin(by_owner, by_owner.c.owner == owner)
        .outerjoin(by_task, by_task.c.task == JobRow.task)
    )
    keys = (
        -JobRow.priority,
        func.coalesce(by_owner.c.started, 0),
        func.coalesce(by_task.c.started, 0),
        JobRow.available_at.expression,
        JobRow.created_at.expression,
    )
    return joined, keys


def claimed_before(
    keys: Sequence[ColumnElement[Any]], values: Sequence[Any]
) -> ColumnElement[bool]:
    """Rows whose ``keys`` sort strictly before ``values`` (lexicographically)."""
    if not keys:
        return false()
    first, rest = keys[0], keys[1:]
    return or_(first < values[0], and_(first == values[0], claimed_before(rest, values[1:])))


def _written(status: JobStatus) -> ColumnElement[str]:
    """``status`` written into the statement, not bound: the planner then knows from its
    statistics how rare each status is, even in a plan made before any value is bound."""
    return literal_column(f"'{status.value}'", String())


HEAD = 32  # jobs a claim on SQLite looks through for one whose requirements it meets


class Claimable(NamedTuple):
    """A queued job a worker may claim, with what its model needs."""

    id: str
    requirements: Mapping[str, Any] | None
    runtime: StoredRuntime | None


class Claimed(NamedTuple):
    """The claimed job's columns as the claim left them."""

    id: str
    model_id: str | None
    task: str
    attempts: int
    max_attempts: int
    kind: str | None
    spec: Mapping[str, Any] | None
    checkpoint: Mapping[str, Any] | None
    platform_faults: int


def looking(now: datetime, capabilities: Capabilities | None) -> dict[str, Any]:
    """The values the search for a claimable job is bound to."""
    gpus = capabilities.gpus if capabilities is not None else 0
    return {"now": now, "since": now - FAIR_SHARE_WINDOW, "gpus": gpus}


def claimable(
    connection: Connection, now: datetime, capabilities: Capabilities | None = None
) -> Claimable | None:
    """The job to run next at ``now``, if any, in claim order, among those whose
    requirements ``capabilities`` meet: GPUs are filtered in SQL, the rest among the first
    ``HEAD``; when none of those fits, among the rest of the queue, so jobs this worker
    cannot run never hold back those it can. On PostgreSQL the first is the best job no
    other claim has locked, locked alone: a claim that locked all it looks through would
    hide the next fair jobs from a claimer beside it (which skips locked rows) and hand
    that one a job from behind them."""
    postgres = connection.dialect.name == "postgresql"
    for job in connection.execute(_head(postgres), looking(now, capabilities)):
        if meets(job.requirements, capabilities):
            return Claimable._make(job)
    return claimable_behind_head(connection, now, capabilities)


def claimable_behind_head(
    connection: Connection,
    now: datetime,
    capabilities: Capabilities | None,
    *,
    head_seen: bool = True,
) -> Claimable | None:
    """Rare: the head of the queue is jobs this worker cannot run (``head_seen``), or every
    job is held by another claim, which may not be able to run it and give it back at its
    commit. Look through the rest, or all (unlocked: the claim's conditional update waits
    for such a claim and settles the race for the job found)."""
    postgres = connection.dialect.name == "postgresql"
    skip = (1 if postgres else HEAD) if head_seen else 0
    for job in connection.execute(_rest(skip), looking(now, capabilities)):
        if meets(job.requirements, capabilities):
            return Claimable._make(job)
    return None


class AtOnce(NamedTuple):
    """What PostgreSQL's one-statement claim did: the job it found and locked (None: no
    job any claim may take now) and, when its model needs nothing, the job as taken."""

    found: Claimable | None
    taken: Claimed | None


def take_at_once(connection: Connection, values: Mapping[str, Any]) -> AtOnce:
    """On PostgreSQL, find the next job and, when its model needs nothing of the worker,
    take it, in one round trip (``values`` as for take, with ``since`` and ``gpus``)."""
    row = connection.execute(_at_once(), values).first()
    if row is None:
        return AtOnce(None, None)
    width = len(Claimable._fields)
    found = Claimable._make(row[:width])
    return AtOnce(found, Claimed._make(row[width:]) if row.taken_id is not None else None)


def take(connection: Connection, values: Mapping[str, Any]) -> Claimed | None:
    """Mark the queued job ``values["job"]`` running under a new lease (the conditional
    update: None when another claim took it first) and open the claim's attempt: on
    PostgreSQL in one statement, elsewhere in two within the caller's transaction."""
    if connection.dialect.name == "postgresql":
        row = connection.execute(_take_and_open(), values).first()
        return None if row is None else Claimed._make(row)
    row = connection.execute(_TAKE, values).first()
    if row is None:
        return None
    connection.execute(_OPEN, values)
    return Claimed._make(row)


def meets(needs: object, capabilities: Capabilities | None) -> bool:
    """Whether a model's stored requirements ``needs`` are met by ``capabilities``."""
    return needs is None or (
        capabilities is not None
        and isinstance(needs, Mapping)
        and Requirements.parse(needs).met_by(capabilities)
    )


def _queued(
    columns: Sequence[Any] = (JobRow.id, ModelRow.requirements, ModelRow.runtime),
) -> Select[Any]:
    """``columns`` of the available queued jobs a worker with ``gpus`` may run, best first
    (by default the job's id and what its model needs)."""
    now = bindparam("now", type_=DateTime())
    joined, keys = _order(bindparam("since", type_=DateTime()), now)
    return (
        select(*columns)
        .select_from(joined)
        .where(
            JobRow.status == _written(JobStatus.QUEUED),
            JobRow.available_at <= now,
            func.coalesce(ModelRow.required_gpus, 0) <= bindparam("gpus", type_=Integer()),
        )
        .order_by(*keys)
    )


@functools.cache
def _head(postgres: bool) -> Select[Any]:
    # PostgreSQL: concurrent claimers skip each other's locked job.
    if postgres:
        return _best_locked()
    return _queued().limit(HEAD)


def _best_locked() -> Select[Any]:
    """The best queued job no other claim holds, locked, with what its model needs. The
    queue is sorted on its keys and ids alone, and the model's columns read for the one
    job found: sorting whole rows with their JSON cost most of a claim."""
    best = (
        _queued((JobRow.id, JobRow.model_id))
        .limit(1)
        .with_for_update(skip_locked=True, of=JobRow)
        .subquery("best")
    )
    return select(best.c.id, ModelRow.requirements, ModelRow.runtime).select_from(
        best.outerjoin(ModelRow, ModelRow.id == best.c.model_id)
    )


@functools.cache
def _rest(skip: int) -> Select[Any]:
    return _queued().offset(skip)


def _take(which: ColumnElement[bool]) -> Update:
    """Mark the queued job ``which`` picks running under the bound lease (its columns bound
    by the names store.leases.lease_columns gives them)."""
    now = bindparam("now", type_=DateTime())
    return (
        update(JobRow)
        .where(which, JobRow.status == _written(JobStatus.QUEUED), JobRow.available_at <= now)
        .values(
            status=JobStatus.RUNNING,
            lease_owner=bindparam("worker", type_=String()),
            lease_token=bindparam("token", type_=String()),
            lease_domain=bindparam("domain", type_=String()),
            heartbeat_at=bindparam("heartbeat_at", type_=DateTime()),
            lease_expires_at=bindparam("lease_expires_at", type_=DateTime()),
            attempts=JobRow.attempts + 1,
            started_at=now,
            stage="claimed",
            progress=0.0,
        )
        .returning(*(JobRow.__table__.c[name] for name in Claimed._fields))
    )


def _opening(taken: FromClause) -> Insert:
    """The claim's attempt, opened from the job as the claim left it (``taken``: its id and
    its attempts, already counting this one)."""
    return insert(AttemptRow).from_select(
        ["job_id", "attempt", "worker", "lease_token", "started_at"],
        select(
            taken.c.id,
            taken.c.attempts,
            bindparam("worker", type_=String()),
            bindparam("token", type_=String()),
            bindparam("now", type_=DateTime()),
        ),
    )


@functools.cache
def _at_once() -> Select[Any]:
    """PostgreSQL's claim in one statement: the best job no other claim holds, locked;
    taken when its model needs nothing of the worker; its attempt opened. The row shows
    the job found and, when taken, the job as the claim left it."""
    found = _head(True).cte("found")
    taken = _take(and_(JobRow.id == found.c.id, found.c.requirements.is_(None))).cte("taken")
    return (
        select(
            *found.c,
            *(taken.c[name].label(f"taken_{name}") for name in Claimed._fields),
        )
        .select_from(found.outerjoin(taken, true()))
        .add_cte(_opening(taken).cte("opened"))
    )


@functools.cache
def _take_and_open() -> Select[Any]:
    """PostgreSQL's take of the job ``job`` and the opening of its attempt, in one
    statement."""
    taken = _take(JobRow.id == bindparam("job", type_=String())).cte("taken")
    return select(*(taken.c[name] for name in Claimed._fields)).add_cte(
        _opening(taken).cte("opened")
    )


_TAKE = _take(JobRow.id == bindparam("job", type_=String()))
_OPEN = _opening(
    select(JobRow.id, JobRow.attempts)
    .where(JobRow.id == bindparam("job", type_=String()))
    .subquery()
)
