"""Saved leaderboard views (named weights with a stable URL, one per task as its default)
and snapshots (a leaderboard frozen as JSON at a moment, never recomputed).

Weights are checked by the API before they get here; this layer stores and reads."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from configs.vocabulary.clock import SYSTEM_CLOCK, Clock
from store.db import Database
from store.models import SnapshotRow, TaskDefaultViewRow, ViewRow

SLUG_LENGTH = 48  # leaves room for a "-<n>" suffix within the 64-character column
SLUG_ATTEMPTS = 3


@dataclass(frozen=True)
class NewView:
    """What a caller asks to save: a name and already-validated weights."""

    task: str
    name: str
    weights: dict[str, float]
    round_weights: dict[str, float]
    owner_id: str | None = None


@dataclass(frozen=True)
class NewSnapshot:
    """A leaderboard as it is now, with what it was computed from."""

    task: str
    leaderboard: Mapping[str, Any]
    weights: dict[str, float]
    round_weights: dict[str, float]
    dataset_hashes: dict[str, str]
    code_version: str
    owner_id: str | None = None


class SavedView(TypedDict):
    """A saved view as stored and shown: named axis and round weights under a slug unique
    within its task; ``default`` when it is the task's default view."""

    id: str
    task: str
    slug: str
    name: str
    weights: dict[str, float]
    round_weights: dict[str, float]
    default: bool
    owner_id: str | None
    created_at: str


class SavedSnapshot(TypedDict):
    """A leaderboard frozen as its JSON at ``created_at``, with what it was computed from."""

    id: str
    task: str
    created_at: str
    weights: dict[str, float]
    round_weights: dict[str, float]
    dataset_hashes: dict[str, str]
    code_version: str
    owner_id: str | None
    leaderboard: Mapping[str, Any]


def slugify(name: str) -> str:
    """``"Fast & small!"`` -> ``"fast-small"``; ``"view"`` when nothing is left."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:SLUG_LENGTH].strip("-")
    return slug or "view"


class Views:
    """View and snapshot operations over a Database."""

    def __init__(self, db: Database, clock: Clock = SYSTEM_CLOCK) -> None:
        self.db = db
        self.clock = clock

    # -- views -------------------------------------------------------------------------------
    def create_view(self, new: NewView) -> SavedView:
        """Save a view under a slug unique within its task (``name``, ``name-2``, ...)."""
        for _ in range(SLUG_ATTEMPTS - 1):
            try:
                return self._insert_view(new)
            except IntegrityError:  # another request took the slug between read and write
                continue
        return self._insert_view(new)

    def _insert_view(self, new: NewView) -> SavedView:
        with self.db.session() as session, session.begin():
            row = ViewRow(
                id=str(uuid.uuid4()),
                task=new.task,
                slug=_free_slug(session, new.task, slugify(new.name)),
                name=new.name,
                weights=dict(new.weights),
                round_weights=dict(new.round_weights),
                owner_id=new.owner_id,
                created_at=self.clock.now(),
            )
            session.add(row)
        return _view_dict(row, default=False)

    def views(self, task: str) -> list[SavedView]:
        """The task's views, oldest first, the default one marked."""
        with self.db.session() as session:
            default = _default_id(session, task)
            rows = session.scalars(
                select(ViewRow).where(ViewRow.task == task).order_by(ViewRow.created_at)
            )
            return [_view_dict(row, default=row.id == default) for row in rows]

    def view(self, view_id: str) -> SavedView | None:
        with self.db.session() as session:
            row = session.get(ViewRow, view_id)
            if row is None:
                return None
            return _view_dict(row, default=_default_id(session, row.task) == row.id)

    def find_view(self, task: str, id_or_slug: str) -> SavedView | None:
        """A view of ``task`` by its id or its slug."""
        found = self.view(id_or_slug)
        if found is not None:
            return found if found["task"] == task else None
        with self.db.session() as session:
            row = session.scalars(
                select(ViewRow).where(ViewRow.task == task, ViewRow.slug == id_or_slug)
            ).first()
            if row is None:
                return None
            return _view_dict(row, default=_default_id(session, task) == row.id)

    def delete_view(self, view_id: str) -> bool:
        """Remove a view (and its task's default mark, if it was the default); False when
        there is no such view."""
        with self.db.session() as session, session.begin():
            row = session.get(ViewRow, view_id, with_for_update=True)
            if row is None:
                return False
            default = session.get(TaskDefaultViewRow, row.task)
            if default is not None and default.view_id == view_id:
                session.delete(default)
                session.flush()  # the mark references the view
            session.delete(row)
        return True

    def default_view(self, task: str) -> SavedView | None:
        with self.db.session() as session:
            default = _default_id(session, task)
        return self.view(default) if default else None

    def set_default(self, task: str, view_id: str | None) -> None:
        """Make ``view_id`` (a view of ``task``) the task's default; None clears it."""
        with self.db.session() as session, session.begin():
            current = session.get(TaskDefaultViewRow, task)
            if view_id is None:
                if current is not None:
                    session.delete(current)
                return
            if current is None:
                session.add(TaskDefaultViewRow(task=task, view_id=view_id, set_at=self.clock.now()))
            else:
                current.view_id, current.set_at = view_id, self.clock.now()

    # -- snapshots ---------------------------------------------------------------------------
    def create_snapshot(self, new: NewSnapshot) -> SavedSnapshot:
        with self.db.session() as session, session.begin():
            row = SnapshotRow(
                id=str(uuid.uuid4()),
                task=new.task,
                leaderboard=new.leaderboard,
                weights=dict(new.weights),
                round_weights=dict(new.round_weights),
                dataset_hashes=dict(new.dataset_hashes),
                code_version=new.code_version,
                owner_id=new.owner_id,
                created_at=self.clock.now(),
            )
            session.add(row)
        return _snapshot_dict(row)

    def snapshot(self, snapshot_id: str) -> SavedSnapshot | None:
        with self.db.session() as session:
            row = session.get(SnapshotRow, snapshot_id)
            return _snapshot_dict(row) if row is not None else None


def _free_slug(session: Session, task: str, base: str) -> str:
    taken = set(
        session.scalars(
            select(ViewRow.slug).where(ViewRow.task == task, ViewRow.slug.startswith(base))
        )
    )
    if base not in taken:
        return base
    return next(f"{base}-{n}" for n in range(2, len(taken) + 3) if f"{base}-{n}" not in taken)


def _default_id(session: Session, task: str) -> str | None:
    row = session.get(TaskDefaultViewRow, task)
    return row.view_id if row is not None else None


def _utc(moment: datetime) -> str:
    return moment.isoformat() + "Z"


def _view_dict(row: ViewRow, *, default: bool) -> SavedView:
    return {
        "id": row.id,
        "task": row.task,
        "slug": row.slug,
        "name": row.name,
        "weights": dict(row.weights),
        "round_weights": dict(row.round_weights),
        "default": default,
        "owner_id": row.owner_id,
        "created_at": _utc(row.created_at),
    }


def _snapshot_dict(row: SnapshotRow) -> SavedSnapshot:
    return {
        "id": row.id,
        "task": row.task,
        "created_at": _utc(row.created_at),
        "weights": dict(row.weights),
        "round_weights": dict(row.round_weights),
        "dataset_hashes": dict(row.dataset_hashes),
        "code_version": row.code_version,
        "owner_id": row.owner_id,
        "leaderboard": row.leaderboard,
    }
