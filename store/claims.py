"""The order in which workers claim queued jobs, shared by the claim itself and by the
queue place a submission shows (``ahead``), so the two never disagree.

Best first: the highest priority (fresh submissions above backfills); then fair shares,
the submitter who has started the fewest jobs in the last ``FAIR_SHARE_WINDOW`` (running
ones counted however old), then the task that has; then the oldest available, then the
oldest made. One submitter's flood of 200 jobs thus cannot hold back another's 2, nor one
task's flood the other tasks. Counting running jobs alone would not do: with one worker
every submitter has at most one, and the flood's older jobs would keep winning."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, FromClause, and_, false, func, or_, select

from configs.vocabulary.jobs import JobStatus
from store.models import JobRow, ModelRow

FAIR_SHARE_WINDOW = timedelta(hours=1)  # how far back the jobs a submitter started count


def claim_order(now: datetime) -> tuple[FromClause, tuple[ColumnElement[Any], ...]]:
    """Jobs joined to their model and to the fair-share counts at ``now``, and the keys a
    claim sorts them by, each ascending (best first)."""
    recent = or_(JobRow.started_at >= now - FAIR_SHARE_WINDOW, JobRow.status == JobStatus.RUNNING)
    owner = func.coalesce(ModelRow.owner_id, "")
    by_owner = (
        select(owner.label("owner"), func.count().label("started"))
        .select_from(JobRow)
        .outerjoin(ModelRow, ModelRow.id == JobRow.model_id)
        .where(recent)
        .group_by(owner)
        .subquery()
    )
    by_task = (
        select(JobRow.task.label("task"), func.count().label("started"))
        .where(recent)
        .group_by(JobRow.task)
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
