"""Which workers are alive, busy or idle: each writes its latest sign of life here (at most
every ``PRESENCE_EVERY_S``), and a clean stop removes its row. ``/metrics`` reads it, so an
idle worker that stopped answering shows as stale too, not only one holding a job."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from configs.vocabulary.clock import SYSTEM_CLOCK, Clock
from store.db import Database
from store.models import WorkerPresenceRow

PRESENCE_EVERY_S = 10.0
# A worker silent this long is forgotten (its host was removed): metrics stop listing it.
FORGET_AFTER = timedelta(days=1)


class WorkerPresence:
    """Workers' latest signs of life over a Database."""

    def __init__(self, db: Database, clock: Clock = SYSTEM_CLOCK) -> None:
        self.db, self.clock = db, clock

    def seen(
        self,
        worker_id: str,
        job_id: str | None = None,
        capabilities: dict[str, Any] | None = None,
    ) -> None:
        now = self.clock.now()
        with self.db.session() as session, session.begin():
            row = session.get(WorkerPresenceRow, worker_id, with_for_update=True)
            if row is None:
                session.add(
                    WorkerPresenceRow(
                        worker_id=worker_id, seen_at=now, job_id=job_id, capabilities=capabilities
                    )
                )
            else:
                row.seen_at, row.job_id, row.capabilities = now, job_id, capabilities

    def gone(self, worker_id: str) -> None:
        """A clean stop: the worker is no longer expected to answer."""
        with self.db.session() as session, session.begin():
            session.execute(
                delete(WorkerPresenceRow).where(WorkerPresenceRow.worker_id == worker_id)
            )


def presence_ages(db: Database, now: datetime) -> dict[str, float]:
    """Seconds since each worker's latest sign of life (forgotten after a day of silence)."""
    with db.session() as session:
        rows = session.execute(
            select(WorkerPresenceRow.worker_id, WorkerPresenceRow.seen_at).where(
                WorkerPresenceRow.seen_at >= now - FORGET_AFTER
            )
        ).all()
    return {str(worker): max(0.0, (now - seen).total_seconds()) for worker, seen in rows}


# A worker seen within this long is live: it writes every PRESENCE_EVERY_S, busy or idle.
LIVE_WITHIN = timedelta(seconds=3 * PRESENCE_EVERY_S)


def live_capabilities_in(session: Session, now: datetime) -> list[dict[str, Any] | None]:
    """What each live worker offers (None: a worker that offers no capabilities)."""
    return list(
        session.scalars(
            select(WorkerPresenceRow.capabilities).where(
                WorkerPresenceRow.seen_at >= now - LIVE_WITHIN
            )
        )
    )
