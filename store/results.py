"""How a finished evaluation is written: every score under its key (replacing the model's
scores on the very data they were computed on, so a rerun or a backfill never doubles
them; other versions of a set stay), the summary row, and the image pin."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, tuple_
from sqlalchemy.orm import Session

from configs.vocabulary.results import EvaluationResult
from store.leases import existing
from store.models import JobRow, ModelRow, ResultRow, ScoreRow


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
