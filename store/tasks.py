"""Task specs in the database: each task's versions (the merged mapping the loader
validates) and the held-out sets added through the API, content-addressed in the blob store.

A change writes the next version and its dataset row in one transaction; the unique
(task, version) constraint makes a concurrent writer of the same version fail instead of
overwriting (``ConcurrentChange``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from configs.vocabulary.clock import SYSTEM_CLOCK, Clock
from store.db import Database
from store.models import TaskDatasetRow, TaskVersionRow


class ConcurrentChange(RuntimeError):
    """Another writer made the version this change meant to write: read again and retry."""


@dataclass(frozen=True)
class StoredSpec:
    """One stored version of a task's spec."""

    task: str
    version: int
    spec: dict[str, Any]
    seed_hash: str
    reason: str
    created_at: datetime


@dataclass(frozen=True)
class NewDataset:
    """A validated held-out set, already in the blob store under ``blob_key``."""

    round: str
    name: str
    sha256: str
    blob_key: str
    examples: int
    previous: int = 0  # the version this one follows at least (a file-backed set is 1)


@dataclass(frozen=True)
class StoredDataset:
    """A held-out set added through the API, as recorded."""

    task: str
    round: str
    name: str
    version: int
    sha256: str
    blob_key: str
    examples: int
    task_version: int
    added_at: datetime


class TaskVersions:
    """Reads and writes task versions and API-added datasets."""

    def __init__(self, db: Database, clock: Clock = SYSTEM_CLOCK) -> None:
        self.db = db
        self.clock = clock

    def latest_versions(self) -> dict[str, int]:
        """Every stored task's newest version, in one query."""
        query = select(TaskVersionRow.task, func.max(TaskVersionRow.version)).group_by(
            TaskVersionRow.task
        )
        with self.db.session() as session:
            return {task: int(version) for task, version in session.execute(query)}

    def latest_version(self, task: str) -> int | None:
        query = select(func.max(TaskVersionRow.version)).where(TaskVersionRow.task == task)
        with self.db.session() as session:
            found = session.scalar(query)
        return None if found is None else int(found)

    def current(self, task: str) -> StoredSpec | None:
        """The newest version of ``task``'s spec, if any is stored."""
        query = (
            select(TaskVersionRow)
            .where(TaskVersionRow.task == task)
            .order_by(TaskVersionRow.version.desc())
            .limit(1)
        )
        with self.db.session() as session:
            row = session.scalar(query)
            return None if row is None else _stored_spec(row)

    def write(
        self,
        task: str,
        version: int,
        spec: dict[str, Any],
        *,
        seed_hash: str,
        reason: str,
        dataset: NewDataset | None = None,
        more: Sequence[NewDataset] = (),
    ) -> StoredDataset | None:
        """Store ``spec`` as ``task``'s ``version`` together with ``dataset`` (its version is
        the next of its name in its round) and ``more`` sets (a task created with several);
        ConcurrentChange when the version exists. Returns ``dataset``'s record."""
        now = self.clock.now()
        try:
            with self.db.session() as session, session.begin():
                session.add(
                    TaskVersionRow(
                        task=task,
                        version=version,
                        spec={**spec, "version": version},
                        seed_hash=seed_hash,
                        reason=reason[:200],
                        created_at=now,
                    )
                )
                session.flush()  # the version claim comes first: a race fails here
                for extra in more:
                    session.add(_dataset_row(task, version, extra, now, session))
                    session.flush()
                if dataset is None:
                    return None
                row = _dataset_row(task, version, dataset, now, session)
                session.add(row)
                session.flush()
                return _stored_dataset(row)
        except IntegrityError:
            raise ConcurrentChange(f"task {task!r} changed meanwhile (version {version})") from None

    def datasets(self, task: str) -> list[StoredDataset]:
        """Every API-added set of ``task``, every version, oldest first."""
        query = (
            select(TaskDatasetRow).where(TaskDatasetRow.task == task).order_by(TaskDatasetRow.id)
        )
        with self.db.session() as session:
            return [_stored_dataset(row) for row in session.scalars(query)]

    def blob_in_use(self, blob_key: str) -> bool:
        """Whether any recorded set names ``blob_key`` (content is shared by hash)."""
        query = select(TaskDatasetRow.id).where(TaskDatasetRow.blob_key == blob_key).limit(1)
        with self.db.session() as session:
            return session.scalar(query) is not None


def _dataset_row(
    task: str, task_version: int, dataset: NewDataset, now: datetime, session: Any
) -> TaskDatasetRow:
    previous = session.scalar(
        select(func.max(TaskDatasetRow.version)).where(
            TaskDatasetRow.task == task,
            TaskDatasetRow.round == dataset.round,
            TaskDatasetRow.name == dataset.name,
        )
    )
    return TaskDatasetRow(
        task=task,
        round=dataset.round,
        name=dataset.name,
        version=max(previous or 0, dataset.previous) + 1,
        sha256=dataset.sha256,
        blob_key=dataset.blob_key,
        examples=dataset.examples,
        task_version=task_version,
        created_at=now,
    )


def _stored_spec(row: TaskVersionRow) -> StoredSpec:
    return StoredSpec(
        row.task, row.version, dict(row.spec), row.seed_hash, row.reason, row.created_at
    )


def _stored_dataset(row: TaskDatasetRow) -> StoredDataset:
    return StoredDataset(
        task=row.task,
        round=row.round,
        name=row.name,
        version=row.version,
        sha256=row.sha256,
        blob_key=row.blob_key,
        examples=row.examples,
        task_version=row.task_version,
        added_at=row.created_at,
    )
