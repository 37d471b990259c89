"""Read-side queries for the API and CLI: submissions, results, leaderboard tables."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from configs.vocabulary.jobs import JobStatus
from configs.vocabulary.results import SCORE_NUMBERS
from store.accounts import Principal, visible_models
from store.db import Database
from store.models import (
    SCORE_KEY_COLUMNS,
    AttemptRow,
    JobRow,
    ModelRow,
    ResultRow,
    ScoreRow,
    TaskRow,
)


class Queries:
    """Reads that turn rows into plain dicts (the API's JSON)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def task_names(self) -> list[str]:
        with self.db.session() as session:
            return list(session.scalars(select(TaskRow.name).order_by(TaskRow.name)))

    def submission(
        self, model_id: str, *, with_scores: bool = False, show_internal: bool = False
    ) -> dict[str, Any] | None:
        """A submission's model, job status/progress/failure and results, or None. Which
        worker ran each attempt (its host name) is internal: shown only with
        ``show_internal`` (for admins, once the API knows roles; the CLI on its own
        database)."""
        with self.db.session() as session:
            model = session.get(ModelRow, model_id)
            if model is None:
                return None
            job = session.scalars(
                select(JobRow).where(JobRow.model_id == model_id).order_by(JobRow.created_at.desc())
            ).first()
            result = session.scalars(
                select(ResultRow)
                .where(ResultRow.model_id == model_id)
                .order_by(ResultRow.created_at.desc())
            ).first()
            shown = _job_dict(job, session, show_internal) if job else None
            data = _model_dict(model) | {"job": shown}
            data["results"] = _result_dict(result) if result else None
            if with_scores and result is not None:
                data["scores"] = [
                    _score_dict(row)
                    for row in session.scalars(
                        select(ScoreRow).where(ScoreRow.job_id == result.job_id)
                    )
                ]
            return data

    def submissions(
        self, task: str | None = None, limit: int = 100, visible_to: Principal | None = None
    ) -> list[dict[str, Any]]:
        """Newest first; only those ``visible_to`` may see when a viewer is given."""
        with self.db.session() as session:
            query = select(ModelRow).order_by(ModelRow.created_at.desc()).limit(limit)
            if task:
                query = query.where(ModelRow.task == task)
            if visible_to is not None:
                query = query.where(visible_models(visible_to))
            ids = [model.id for model in session.scalars(query)]
        return [s for s in (self.submission(i) for i in ids) if s is not None]

    def leaderboard_rows(self, task: str) -> list[dict[str, Any]]:
        """Each model's newest finished result on ``task`` (summary axes + rounds)."""
        with self.db.session() as session:
            rows = session.execute(
                select(ModelRow, ResultRow)
                .join(ResultRow, ResultRow.model_id == ModelRow.id)
                .where(ModelRow.task == task)
                .order_by(ResultRow.created_at)
            ).all()
        newest: dict[str, dict[str, Any]] = {}
        for model, result in rows:
            newest[model.id] = {
                "model_id": model.id,
                "name": model.name,
                **result.summary,
                "rounds": result.rounds,
                "image_id": model.image_id,
                "dataset_hashes": result.provenance.get("dataset_hashes", {}),
            }
        return list(newest.values())

    def rescoring_candidates(self, task: str) -> list[tuple[str, dict[str, str]]]:
        """(model id, dataset hashes of its newest result) for every model on ``task`` that
        has a result and no job waiting or running."""
        busy = (JobStatus.QUEUED, JobStatus.RUNNING)
        with self.db.session() as session:
            pending = set(
                session.scalars(
                    select(JobRow.model_id).where(JobRow.task == task, JobRow.status.in_(busy))
                )
            )
        return [
            (row["model_id"], row["dataset_hashes"])
            for row in self.leaderboard_rows(task)
            if row["model_id"] not in pending
        ]

    def job_counts(self) -> dict[str, int]:
        with self.db.session() as session:
            counts: dict[str, int] = {}
            for status in session.scalars(select(JobRow.status)):
                counts[status] = counts.get(status, 0) + 1
            return counts


def _model_dict(model: ModelRow) -> dict[str, Any]:
    runtime = {k: v for k, v in model.runtime.items() if k in ("kind", "protocol", "image")}
    return {
        "id": model.id,
        "task": model.task,
        "name": model.name,
        "runtime": runtime,
        "image_id": model.image_id,
        "created_at": _utc(model.created_at),
    }


def _job_dict(job: JobRow, session: Session, show_internal: bool = False) -> dict[str, Any]:
    attempts = session.scalars(
        select(AttemptRow).where(AttemptRow.job_id == job.id).order_by(AttemptRow.attempt)
    ).all()
    failure = None
    if job.failure_code:
        failure = {
            "code": job.failure_code,
            "message": job.failure_message,
            "log_tail": job.log_tail or "",
        }
    return {
        "id": job.id,
        "status": job.status,
        "progress": round(job.progress, 4),
        "stage": job.stage,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "failure": failure,
        "attempt_history": [
            {
                "attempt": a.attempt,
                **({"worker": a.worker} if show_internal else {}),  # a host name: internal
                "outcome": a.outcome,
                "failure_code": a.failure_code,
                "failure_message": a.failure_message,
            }
            for a in attempts
        ],
        "created_at": _utc(job.created_at),
        "finished_at": _utc(job.finished_at) if job.finished_at else None,
    }


def _utc(moment: datetime) -> str:
    """A stored (naive UTC) time as ISO 8601 with its zone: ``...Z``."""
    return moment.isoformat() + "Z"


def _result_dict(result: ResultRow) -> dict[str, Any]:
    return {
        **result.summary,
        "rounds": result.rounds,
        "slices": result.slices,
        "profile": result.profile,
        "provenance": result.provenance,
    }


def _score_dict(row: ScoreRow) -> dict[str, Any]:
    """A stored score as the API shows it: its key (the task is implied) and its numbers."""
    fields = [name for name in SCORE_KEY_COLUMNS if name != "task"]
    return {field: getattr(row, field) for field in [*fields, *SCORE_NUMBERS]}
