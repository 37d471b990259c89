"""Idempotent submissions: a client sends an ``Idempotency-Key`` with each submission, and a
repeat by the same submitter (a retry after a client-side timeout, a double click) finds the
first submission instead of making, and charging, a second one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from store.db import Database
from store.models import JobRow, ModelRow


@dataclass(frozen=True)
class KeyedSubmission:
    """The submission an idempotency key already made."""

    model_id: str
    job_id: str | None
    task: str
    name: str
    status: str  # its newest job's
    blob: str | None = None  # its uploaded image's key, if it was uploaded
    requirements: dict[str, Any] | None = None  # as stored (None: it needs nothing)


class DuplicateSubmission(Exception):
    """The key was used by this submitter already (two requests raced to the insert)."""

    def __init__(self, first: KeyedSubmission) -> None:
        super().__init__(f"idempotency key already made submission {first.model_id}")
        self.first = first


def find_by_key(db: Database, owner_id: str | None, key: str) -> KeyedSubmission | None:
    """The submission ``owner_id`` made with ``key``, if any (with its first job)."""
    owner = ModelRow.owner_id.is_(None) if owner_id is None else ModelRow.owner_id == owner_id
    with db.session() as session:
        model = session.scalars(
            select(ModelRow).where(owner, ModelRow.idempotency_key == key)
        ).first()
        if model is None:
            return None
        jobs = session.execute(
            select(JobRow.id, JobRow.status)
            .where(JobRow.model_id == model.id)
            .order_by(JobRow.created_at)
        ).all()
        first_job = str(jobs[0][0]) if jobs else None
        status = str(jobs[-1][1]) if jobs else "queued"
        blob = model.runtime.get("blob") if isinstance(model.runtime, dict) else None
        return KeyedSubmission(
            model.id, first_job, model.task, model.name, status, blob, model.requirements
        )
