"""Image retention: which uploaded images are kept, and the mark a model row gets when its
image is gone.

A backfill runs every scored model again on new data, so a scored model's image is kept (for
ever by default, ``keep_scored_images_days`` otherwise, counted from its newest result). An
image that never produced a score goes ``keep_unscored_images_days`` after its newest job
ended. Nothing waiting or running is touched. Removing marks the row first and deletes the
blob second (a delete that fails unmarks it): a model never loses its image silently, and
it keeps its scores and its place on the board.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update

from configs.settings import ImageRetention
from configs.vocabulary.jobs import JobStatus
from store.blobs import BlobStore
from store.db import Database
from store.models import JobRow, ModelRow, ResultRow
from store.rules.retention import removal_reason


@dataclass(frozen=True)
class Pruned:
    """One image the policy removes (or, in a dry run, would remove)."""

    model_id: str
    name: str
    blob: str
    reason: str


def mark_image_gone(db: Database, model_id: str, reason: str, now: datetime) -> bool:
    """Record that ``model_id``'s image is gone (the first reason stays); True if marked now."""
    with db.session() as session, session.begin():
        changed = session.execute(
            update(ModelRow)
            .where(ModelRow.id == model_id, ModelRow.image_gone.is_(None))
            .values(image_gone=reason[:300], image_gone_at=now)
        )
        return bool(getattr(changed, "rowcount", 0))


def due_for_removal(db: Database, policy: ImageRetention, now: datetime) -> list[Pruned]:
    """The uploaded images ``policy`` removes at ``now``."""
    with db.session() as session:
        models = session.scalars(select(ModelRow).where(ModelRow.image_gone.is_(None))).all()
        busy = set(
            session.scalars(
                select(JobRow.model_id).where(
                    JobRow.status.in_((JobStatus.QUEUED, JobStatus.RUNNING))
                )
            )
        )
        scored_at = dict(
            session.execute(
                select(ResultRow.model_id, func.max(ResultRow.created_at)).group_by(
                    ResultRow.model_id
                )
            ).all()
        )
        ended_at = dict(
            session.execute(
                select(JobRow.model_id, func.max(JobRow.finished_at)).group_by(JobRow.model_id)
            ).all()
        )
    due = []
    for model in models:
        blob = (model.runtime or {}).get("blob")
        if not blob or model.id in busy:
            continue
        reason = removal_reason(policy, scored_at.get(model.id), ended_at.get(model.id), now)
        if reason is not None:
            due.append(Pruned(model.id, model.name, str(blob), reason))
    return due


def prune_images(
    db: Database, blobs: BlobStore, policy: ImageRetention, now: datetime, *, dry_run: bool = False
) -> list[Pruned]:
    """Remove what ``policy`` says is due (mark first, delete second); returns what went."""
    due = due_for_removal(db, policy, now)
    if dry_run:
        return due
    removed = []
    for item in due:
        if not mark_image_gone(db, item.model_id, item.reason, now):
            continue  # marked meanwhile (another prune, or a worker found it gone)
        try:
            blobs.delete(item.blob)
        except Exception:
            _unmark(db, item.model_id)  # still there: the row must not say otherwise
            raise
        removed.append(item)
    return removed


def _unmark(db: Database, model_id: str) -> None:
    with db.session() as session, session.begin():
        session.execute(
            update(ModelRow)
            .where(ModelRow.id == model_id)
            .values(image_gone=None, image_gone_at=None)
        )
