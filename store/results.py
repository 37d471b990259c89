"""How a finished evaluation is written: every score under its key (replacing the model's
scores on the very data they were computed on, so a rerun or a backfill never doubles
them; other versions of a set stay), the summary row, and the image pin."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, tuple_
from sqlalchemy.orm import Session

from configs.vocabulary.jobs import JobStatus
from configs.vocabulary.results import EvaluationResult
from store.leases import existing, release_lease
from store.models import JobRow, ModelRow, ResultRow, ScoreRow
from store.webhooks import notify_final


def store_result(
    session: Session, job: JobRow, model_id: str, result: EvaluationResult, now: datetime
) -> None:
    """Every score (replacing the model's on the same data), the summary, the image pin."""
    rows = _score_rows(job, result)
    _replace_scores(session, model_id, rows)
    session.add_all(rows)
    image_id = (result.provenance.get("runtime") or {}).get("image_id")
    if image_id:  # pin the model to the exact image its scores came from
        existing(session.get(ModelRow, model_id)).image_id = image_id
    session.add(_result_row(job, result, now))


def _result_row(job: JobRow, result: EvaluationResult, now: datetime) -> ResultRow:
    return ResultRow(
        job_id=job.id,
        model_id=job.model_id,
        task=job.task,
        summary=result.summary,
        rounds=result.rounds,
        slices=result.slices,
        profile=result.profile,
        provenance=result.provenance,
        created_at=now,
    )


def _replace_scores(session: Session, model_id: str, rows: list[ScoreRow]) -> None:
    """Drop the model's earlier scores on the very data these rows were computed on (a
    rerun or a backfill re-scores it); scores on other versions of a set stay."""
    computed_on = {(row.round, row.dataset, row.dataset_hash) for row in rows}
    if not computed_on:
        return
    session.execute(
        delete(ScoreRow).where(
            ScoreRow.model_id == model_id,
            tuple_(ScoreRow.round, ScoreRow.dataset, ScoreRow.dataset_hash).in_(computed_on),
        )
    )


def _score_rows(job: JobRow, result: EvaluationResult) -> list[ScoreRow]:
    """One row per Score: the ScoreKey's fields are the row's key columns."""
    return [
        ScoreRow(model_id=job.model_id, job_id=job.id, **score.to_dict()) for score in result.scores
    ]


def record_done(
    session: Session, job: JobRow, result: EvaluationResult, now: datetime, stage: str = "done"
) -> None:
    """Mark ``job`` done with ``result`` in this transaction: its scores and summary (a
    round's job, an adversary run, stored its own), the lease dropped, the outbox told.
    The caller has closed the attempt that produced it (that needs the lease)."""
    if job.model_id is not None:
        store_result(session, job, job.model_id, result, now)
    job.status, job.progress, job.stage, job.finished_at = JobStatus.DONE, 1.0, stage, now
    # an earlier attempt's failure stays in its attempt row, not on a finished job
    release_lease(job, None)
    notify_final(session, job, now, result=result)  # the outbox, in this transaction
