"""Resumable uploads' rows: who sends which image to which task, in parts of what size, and
where it stands (receiving parts, finishing into a submission, interrupted while finishing,
submitted). The parts
themselves are the blob store's; the rules of sending them are ``usecases.uploads``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sqlalchemy import delete, or_, select, update

from store.db import Database
from store.models import ModelRow, UploadRow


class UploadState(StrEnum):
    RECEIVING = "receiving"  # parts may be sent, again and in any order
    # its parts are being joined, checked and submitted, by a request holding a lease until
    # ``expires_at`` that it renews while it works
    FINISHING = "finishing"
    # its parts were joined, then the request making the submission died: it may be
    # submitted again (or deleted) as it is
    INTERRUPTED = "interrupted"
    SUBMITTED = "submitted"  # it became the submission ``model_id``


@dataclass(frozen=True)
class UploadRecord:
    """One resumable upload as stored."""

    id: str
    task: str
    owner_id: str | None
    filename: str
    size: int
    part_bytes: int
    blob_key: str
    handle: str
    created_at: datetime
    expires_at: datetime
    state: UploadState = UploadState.RECEIVING
    model_id: str | None = None


def _record(row: UploadRow) -> UploadRecord:
    return UploadRecord(
        row.id,
        row.task,
        row.owner_id,
        row.filename,
        row.size,
        row.part_bytes,
        row.blob_key,
        row.handle,
        row.created_at,
        row.expires_at,
        UploadState(row.state),
        row.model_id,
    )


class Uploads:
    """Upload rows over a Database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, record: UploadRecord) -> None:
        with self.db.session() as session, session.begin():
            session.add(
                UploadRow(
                    id=record.id,
                    task=record.task,
                    owner_id=record.owner_id,
                    filename=record.filename,
                    size=record.size,
                    part_bytes=record.part_bytes,
                    blob_key=record.blob_key,
                    handle=record.handle,
                    created_at=record.created_at,
                    expires_at=record.expires_at,
                    state=record.state.value,
                    model_id=record.model_id,
                )
            )

    def get(self, upload_id: str) -> UploadRecord | None:
        with self.db.session() as session:
            row = session.get(UploadRow, upload_id)
            return None if row is None else _record(row)

    def open_of(self, owner_id: str | None, now: datetime) -> list[UploadRecord]:
        """Uploads of ``owner_id`` not yet submitted, oldest first: receiving or interrupted
        and not expired, or being submitted (a lapsed lease included: it is to be looked at)."""
        owner = UploadRow.owner_id.is_(None) if owner_id is None else UploadRow.owner_id == owner_id
        kept = (UploadState.RECEIVING.value, UploadState.INTERRUPTED.value)
        with self.db.session() as session:
            rows = session.scalars(
                select(UploadRow)
                .where(
                    owner,
                    or_(
                        UploadRow.state == UploadState.FINISHING.value,
                        UploadRow.state.in_(kept) & (UploadRow.expires_at > now),
                    ),
                )
                .order_by(UploadRow.created_at)
            )
            return [_record(row) for row in rows]

    def touch(self, upload_id: str, expires_at: datetime) -> None:
        """Keep a receiving upload for longer (a part arrived)."""
        self._update(upload_id, UploadState.RECEIVING, expires_at=expires_at)

    def move(
        self,
        upload_id: str,
        was: UploadState,
        to: UploadState,
        model_id: str | None = None,
        expires_at: datetime | None = None,
    ) -> bool:
        """Move an upload from state ``was`` to ``to`` (and keep it until ``expires_at`` when
        given); False if it was not in ``was`` (a concurrent request moved it first)."""
        values: dict[str, object] = {"state": to.value, "model_id": model_id}
        if expires_at is not None:
            values["expires_at"] = expires_at
        return self._update(upload_id, was, **values)

    def renew(self, upload_id: str, expires_at: datetime) -> bool:
        """Extend the lease of an upload being submitted; False if it is no longer that."""
        return self._update(upload_id, UploadState.FINISHING, expires_at=expires_at)

    def take_lapsed(
        self,
        upload_id: str,
        now: datetime,
        to: UploadState,
        expires_at: datetime,
        model_id: str | None = None,
    ) -> bool:
        """Move an upload whose submitting request let its lease lapse (it died) to ``to``;
        False if the lease was renewed, or another caller moved it first."""
        with self.db.session() as session, session.begin():
            done = session.execute(
                update(UploadRow)
                .where(
                    UploadRow.id == upload_id,
                    UploadRow.state == UploadState.FINISHING.value,
                    UploadRow.expires_at <= now,
                )
                .values(state=to.value, expires_at=expires_at, model_id=model_id)
            )
            return bool(done.rowcount)  # type: ignore[attr-defined]

    def settle_submitted(self, upload_id: str, model_id: str, expires_at: datetime) -> None:
        """Record the submission an upload became, whatever state a lapse left it in: the
        submission exists, and the row must say so (its image is the submission's)."""
        with self.db.session() as session, session.begin():
            session.execute(
                update(UploadRow)
                .where(UploadRow.id == upload_id)
                .values(state=UploadState.SUBMITTED.value, model_id=model_id, expires_at=expires_at)
            )

    def submission_holding(self, record: UploadRecord) -> str | None:
        """The submission made of this upload's image, if one was made (its row is written
        before the upload's says so: a crash between the two leaves only the model)."""
        owner = ModelRow.owner_id == record.owner_id
        with self.db.session() as session:
            rows = session.execute(
                select(ModelRow.id, ModelRow.runtime).where(
                    ModelRow.task == record.task, owner, ModelRow.created_at >= record.created_at
                )
            ).all()
        return next((id_ for id_, run in rows if (run or {}).get("blob") == record.blob_key), None)

    def claim_expired(self, upload_id: str, was: UploadState, now: datetime) -> bool:
        """Take an upload in state ``was`` past its time for dropping (False if a part kept
        it meanwhile, or a submission took it)."""
        with self.db.session() as session, session.begin():
            done = session.execute(
                update(UploadRow)
                .where(
                    UploadRow.id == upload_id,
                    UploadRow.state == was.value,
                    UploadRow.expires_at <= now,
                )
                .values(state=UploadState.FINISHING.value)
            )
            return bool(done.rowcount)  # type: ignore[attr-defined]

    def remove(self, upload_id: str) -> None:
        with self.db.session() as session, session.begin():
            session.execute(delete(UploadRow).where(UploadRow.id == upload_id))

    def expired(self, now: datetime, limit: int = 50) -> list[UploadRecord]:
        """Uploads past their time, oldest first."""
        with self.db.session() as session:
            rows = session.scalars(
                select(UploadRow)
                .where(UploadRow.expires_at <= now)
                .order_by(UploadRow.expires_at)
                .limit(limit)
            )
            return [_record(row) for row in rows]

    def _update(self, upload_id: str, was: UploadState, **values: object) -> bool:
        with self.db.session() as session, session.begin():
            done = session.execute(
                update(UploadRow)
                .where(UploadRow.id == upload_id, UploadRow.state == was.value)
                .values(**values)
            )
            return bool(done.rowcount)  # type: ignore[attr-defined]
