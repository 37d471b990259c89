"""Backfills: one job per scored model when a dataset version is new to its task, scoped to
the sets that changed, and what such a job keeps of the model's newest result.

A backfill job (``JobKind.EVALUATE`` with a ``scope`` in its spec) sends the model only the
sets whose current version it was never scored on; every other set's scores, slices and
predictions, and the profile, are carried over from the newest result, so the job writes a
complete result again (the leaderboard reads one result per model) without re-running what
is still valid. A model whose image is gone gets no job: it keeps its scores and its row
says why it was not backfilled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from configs.vocabulary.jobs import JobStatus
from configs.vocabulary.results import SCORE_NUMBERS, Score, ScoreKey, SliceRow
from store.db import Database
from store.jobs import JobStore
from store.models import SCORE_KEY_COLUMNS, JobRow, ModelRow, ResultRow, ScoreRow
from store.rules.backfill import stale_sets

BACKFILL_PRIORITY = -10  # claimed after every new submission (priority 0)
BACKFILL_STAGE = "queued: backfill on new task data"


@dataclass(frozen=True)
class SetPredictions:
    """A model's original-set outputs on one dataset version, in the set's order."""

    dataset_hash: str
    uids: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class CarriedResult:
    """The newest result of a model, as a backfill keeps it: every score (with its key), the
    slice reports, the profile and provenance, and the stored predictions per set (filled by
    the worker from the blob store; a set without them is scored again)."""

    job_id: str
    scores: tuple[Score, ...]
    slices: tuple[SliceRow, ...]
    profile: dict[str, Any]
    provenance: dict[str, Any]
    predictions: Mapping[tuple[str, str], SetPredictions] = field(default_factory=dict)

    def set_scores(self, round_name: str, dataset: str, digest: str) -> list[Score]:
        return [
            s
            for s in self.scores
            if (s.key.round, s.key.dataset, s.key.dataset_hash) == (round_name, dataset, digest)
        ]


@dataclass(frozen=True)
class BackfillPlan:
    """What a backfill of one task queued, and whom it skipped and why."""

    jobs: tuple[str, ...] = ()
    skipped: Mapping[str, str] = field(default_factory=dict)  # model id -> why


def newest_result(db: Database, model_id: str) -> CarriedResult | None:
    """The model's newest stored result with its scores, or None when it has none."""
    with db.session() as session:
        result = session.scalars(
            select(ResultRow)
            .where(ResultRow.model_id == model_id)
            .order_by(ResultRow.created_at.desc())
        ).first()
        if result is None:
            return None
        rows = session.scalars(select(ScoreRow).where(ScoreRow.job_id == result.job_id)).all()
        return CarriedResult(
            job_id=result.job_id,
            scores=tuple(_score(row) for row in rows),
            slices=tuple(result.slices or ()),
            profile=dict(result.profile or {}),
            provenance=dict(result.provenance or {}),
        )


def queue_backfills(
    store: JobStore, candidates: Iterable[tuple[str, Mapping[str, str]]], current: Mapping[str, str]
) -> BackfillPlan:
    """One job per candidate (model id, the set versions of its newest result) scored on
    other data than ``current``, scoped to the stale sets; none for a model whose image is
    gone (listed in ``skipped``). Idempotent: a model with a job queued or running is not a
    candidate (``Queries.rescoring_candidates``), and one scored on ``current`` needs none."""
    jobs: list[str] = []
    skipped: dict[str, str] = {}
    gone = _gone_images(store.db, [model_id for model_id, _ in candidates])
    for model_id, scored_on in candidates:
        stale = stale_sets(scored_on, current)
        if not stale.sets:
            continue
        if model_id in gone:
            skipped[model_id] = f"its image is gone: {gone[model_id]}"
            continue
        spec = {"scope": stale.to_dict()}
        jobs.append(
            store.enqueue(model_id, stage=BACKFILL_STAGE, priority=BACKFILL_PRIORITY, spec=spec)
        )
    return BackfillPlan(tuple(jobs), skipped)


def backfill_jobs(db: Database, task: str) -> list[dict[str, Any]]:
    """The task's backfill jobs, oldest first: id, model, status and scope."""
    with db.session() as session:
        rows = session.scalars(
            select(JobRow)
            .where(JobRow.task == task, JobRow.spec.is_not(None))
            .order_by(JobRow.created_at)
        ).all()
        return [
            {"id": r.id, "model_id": r.model_id, "status": JobStatus(r.status).value, **r.spec}
            for r in rows
            if r.spec and "scope" in r.spec
        ]


def _gone_images(db: Database, model_ids: list[str]) -> dict[str, str]:
    if not model_ids:
        return {}
    with db.session() as session:
        rows = session.execute(
            select(ModelRow.id, ModelRow.image_gone).where(
                ModelRow.id.in_(model_ids), ModelRow.image_gone.is_not(None)
            )
        ).all()
    return {model_id: str(why) for model_id, why in rows}


def _score(row: ScoreRow) -> Score:
    key = ScoreKey(**{name: getattr(row, name) for name in SCORE_KEY_COLUMNS})
    numbers = {name: getattr(row, name) for name in SCORE_NUMBERS}
    return Score(key, **numbers)
