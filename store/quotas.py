"""What a user's submissions to a task have cost them, counted in one query."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, case, distinct, func, or_, select

from configs.vocabulary.jobs import JobStatus
from store.db import Database
from store.models import JobRow, ModelRow
from store.rules.quotas import CHARGED_STATUSES, USER_CAUSED_FAILURES


@dataclass(frozen=True)
class Usage:
    """Charged submissions of one user to one task: since ``day_start`` and in total."""

    today: int
    total: int


def charged_usage(db: Database, user_id: str, task: str, day_start: datetime) -> Usage:
    """Submissions (models) of ``user_id`` to ``task`` with at least one job that is
    queued, running, done, or failed through the submission's own fault (the SQL of
    ``store.rules.quotas.is_charged``)."""
    charged = or_(
        JobRow.status.in_(CHARGED_STATUSES),
        and_(
            JobRow.status == JobStatus.FAILED.value, JobRow.failure_code.in_(USER_CAUSED_FAILURES)
        ),
    )
    today = case((ModelRow.created_at >= day_start, ModelRow.id))
    query = (
        select(func.count(distinct(ModelRow.id)), func.count(distinct(today)))
        .select_from(ModelRow)
        .join(JobRow, JobRow.model_id == ModelRow.id)
        .where(ModelRow.owner_id == user_id, ModelRow.task == task, charged)
    )
    with db.session() as session:
        total, today_count = session.execute(query).one()
    return Usage(today=int(today_count), total=int(total))
