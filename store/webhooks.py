"""Webhooks and their outbox: who is told what, and every delivery to make.

A job's final state and the deliveries it causes are written in ONE transaction
(``notify_final`` runs inside the store's own), so a crash never loses a notification nor
sends one for a state that was rolled back. Notifiers (worker.webhooks) claim due rows with
a short claim — a conditional UPDATE, the candidates picked with ``FOR UPDATE SKIP LOCKED``
on PostgreSQL, as store.jobs claims jobs — so two notifiers never send one row at once.

The signing secret cannot be hashed (signing needs the secret itself), so it is sealed at
rest (``store.sealing``: encrypted under the settings' key). It leaves this module only to
sign (``DueDelivery``, repr-hidden) and, once, to its creator."""

from __future__ import annotations

import logging
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypedDict, cast

from sqlalchemy import CursorResult, Update, and_, delete, or_, select, update
from sqlalchemy.orm import Session

from configs.vocabulary.clock import SYSTEM_CLOCK, Clock
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import JobStatus
from configs.vocabulary.results import EvaluationResult, Failure, RoundRow
from configs.vocabulary.webhooks import (
    CANCELLED,
    DEFAULT_MAX_ATTEMPTS,
    DONE,
    FAILED,
    PING,
    SECRET_PREFIX,
    EventRound,
    WebhookPayload,
    retry_delay,
)
from store.db import Database
from store.models import JobRow, ModelRow, WebhookDeliveryRow, WebhookRow
from store.sealing import Sealer, SealError

PENDING, DELIVERED, GAVE_UP = "pending", "delivered", "failed"
CLAIM_S = 120.0  # a claimed delivery is hidden from other notifiers this long
HISTORY = 20  # attempts kept per delivery
MAX_PER_USER = 50
_SUMMARY_AXES = ("performance", "throughput", "memory", "robustness", "fairness")


@dataclass(frozen=True)
class Webhook:
    """A webhook as its owner sees it (never its secret)."""

    id: str
    owner_id: str
    model_id: str | None
    url: str
    events: tuple[str, ...]
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "owner_id": self.owner_id,
            "model_id": self.model_id,
            "url": self.url,
            "events": list(self.events),
            "created_at": _iso(self.created_at),
        }


class DeliveryInfo(TypedDict):
    """A delivery as the webhook's owner lists it: its state, attempts so far and when the
    next is due (while pending), and every attempt's time, status code or error."""

    id: str
    event: str
    status: str
    attempts: int
    max_attempts: int
    last_status_code: int | None
    last_error: str | None
    next_attempt_at: str | None
    last_attempt_at: str | None
    created_at: str | None
    history: list[dict[str, Any]]


@dataclass(frozen=True)
class DueDelivery:
    """A claimed delivery: what to send, where, and the claim that may record its outcome."""

    id: str
    webhook_id: str
    url: str
    event: str
    payload: WebhookPayload
    attempt: int
    token: str
    secret: str = field(repr=False)


@dataclass(frozen=True)
class AttemptReport:
    """How one attempt went: the receiver's HTTP status, or why there was none."""

    status_code: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class TooManyWebhooks(ValueError):
    """The user has MAX_PER_USER webhooks already."""


log = logging.getLogger(__name__)


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_hex(32)


class WebhookStore:
    """Webhooks, their deliveries and the notifiers' claims over a Database."""

    def __init__(
        self,
        db: Database,
        sealer: Sealer,
        clock: Clock = SYSTEM_CLOCK,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        self.db, self.sealer, self.clock, self.max_attempts = db, sealer, clock, max_attempts

    def seal_plaintext(self) -> int:
        """Seal secrets stored before sealing existed; how many there were."""
        with self.db.session() as session, session.begin():
            rows = session.scalars(
                select(WebhookRow).where(WebhookRow.secret.not_like("sealed:%"))
            ).all()
            for row in rows:
                row.secret = self.sealer.seal(row.secret)
            return len(rows)

    # -- webhooks ----------------------------------------------------------------------------
    def create(
        self, owner_id: str, url: str, events: Sequence[str], model_id: str | None = None
    ) -> tuple[Webhook, str]:
        """A new webhook and its secret (the only time the secret is returned)."""
        secret = new_secret()
        with self.db.session() as session, session.begin():
            mine = session.scalars(select(WebhookRow.id).where(WebhookRow.owner_id == owner_id))
            if len(mine.all()) >= MAX_PER_USER:
                raise TooManyWebhooks(f"you have {MAX_PER_USER} webhooks; delete one first")
            row = WebhookRow(
                id=str(uuid.uuid4()),
                owner_id=owner_id,
                model_id=model_id,
                url=url,
                events=" ".join(dict.fromkeys(events)),
                secret=self.sealer.seal(secret),
                created_at=self.clock.now(),
            )
            session.add(row)
        return _webhook(row), secret

    def get(self, webhook_id: str) -> Webhook | None:
        with self.db.session() as session:
            row = session.get(WebhookRow, webhook_id)
            return _webhook(row) if row else None

    def webhooks(self, owner_id: str | None) -> list[Webhook]:
        """``owner_id``'s webhooks (everyone's for None), newest first."""
        query = select(WebhookRow).order_by(WebhookRow.created_at.desc(), WebhookRow.id)
        if owner_id is not None:
            query = query.where(WebhookRow.owner_id == owner_id)
        with self.db.session() as session:
            return [_webhook(row) for row in session.scalars(query)]

    def delete(self, webhook_id: str) -> bool:
        """Remove a webhook with its deliveries (pending ones are never sent)."""
        with self.db.session() as session, session.begin():
            return _forget(session, WebhookRow.id == webhook_id) > 0

    def rotate_secret(self, webhook_id: str) -> str | None:
        """A new secret (returned this once); the old one signs nothing from now on."""
        secret = new_secret()
        with self.db.session() as session, session.begin():
            statement = update(WebhookRow).where(WebhookRow.id == webhook_id)
            sealed = statement.values(secret=self.sealer.seal(secret))
            return secret if updated(session, sealed) == 1 else None

    # -- deliveries --------------------------------------------------------------------------
    def deliveries(self, webhook_id: str, limit: int = 50) -> list[DeliveryInfo]:
        """The newest ``limit`` deliveries of a webhook, as its owner may see them."""
        query = (
            select(WebhookDeliveryRow)
            .where(WebhookDeliveryRow.webhook_id == webhook_id)
            .order_by(WebhookDeliveryRow.created_at.desc(), WebhookDeliveryRow.id)
            .limit(limit)
        )
        with self.db.session() as session:
            return [_delivery(row) for row in session.scalars(query)]

    def ping(self, webhook_id: str) -> str | None:
        """Queue a ``ping`` to the webhook now; the delivery id (None: no such webhook)."""
        now = self.clock.now()
        with self.db.session() as session, session.begin():
            row = session.get(WebhookRow, webhook_id)
            if row is None:
                return None
            delivery_id = str(uuid.uuid4())
            payload: WebhookPayload = {"id": delivery_id, "event": PING, "created_at": _iso(now)}
            payload["webhook"] = {"id": row.id, "model_id": row.model_id}
            session.add(_outbox_row(delivery_id, row.id, PING, payload, now, self.max_attempts))
        return delivery_id

    def claim_due(self, limit: int = 10, claim_s: float = CLAIM_S) -> list[DueDelivery]:
        """Up to ``limit`` due deliveries, each claimed for ``claim_s`` (an attempt counted)."""
        now = self.clock.now()
        with self.db.session() as session, session.begin():
            claimed = []
            for delivery_id in _candidates(session, now, limit):
                token = uuid.uuid4().hex
                won = updated(
                    session,
                    update(WebhookDeliveryRow)
                    .where(WebhookDeliveryRow.id == delivery_id, *_due(now))
                    .values(
                        claim_token=token,
                        next_attempt_at=now + timedelta(seconds=claim_s),
                        attempts=WebhookDeliveryRow.attempts + 1,
                    ),
                )
                if won == 1:  # another webhook sender took it between the pick and here
                    try:
                        claimed.append(_due_delivery(session, delivery_id, token, self.sealer))
                    except SealError as exc:  # retried once the key is right; never unsigned
                        log.error("webhook delivery %s not sent: %s", delivery_id, exc)
            return claimed

    def release(self, delivery: DueDelivery) -> None:
        """Give back a claimed delivery that was never sent (its webhook sender is stopping): due
        now for any other webhook sender, its attempt not counted."""
        with self.db.session() as session, session.begin():
            session.execute(
                update(WebhookDeliveryRow)
                .where(
                    WebhookDeliveryRow.id == delivery.id,
                    WebhookDeliveryRow.claim_token == delivery.token,
                )
                .values(
                    claim_token=None,
                    next_attempt_at=self.clock.now(),
                    attempts=WebhookDeliveryRow.attempts - 1,
                )
            )

    def record(self, delivery: DueDelivery, report: AttemptReport) -> str | None:
        """Store an attempt's outcome: delivered, retried after the back-off, or failed once
        the attempts run out. The new status; None when the claim was lost (deleted)."""
        now = self.clock.now()
        with self.db.session() as session, session.begin():
            row = session.scalars(
                select(WebhookDeliveryRow)
                .where(
                    WebhookDeliveryRow.id == delivery.id,
                    WebhookDeliveryRow.claim_token == delivery.token,
                )
                .with_for_update()
            ).first()
            if row is None:
                return None
            entry = {"at": _iso(now), "status_code": report.status_code, "error": report.error}
            row.history = [*row.history, entry][-HISTORY:]
            row.last_status_code, row.last_error = report.status_code, report.error
            row.last_attempt_at, row.claim_token = now, None
            if report.ok:
                row.status, row.next_attempt_at = DELIVERED, None
            elif row.attempts >= row.max_attempts:
                row.status, row.next_attempt_at = GAVE_UP, None
            else:
                row.next_attempt_at = now + retry_delay(row.attempts)
            return row.status


# -- the outbox, written inside the store's transactions ----------------------------------------
def notify_final(
    session: Session,
    job: JobRow,
    now: datetime,
    failure: Failure | None = None,
    result: EvaluationResult | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> None:
    """Queue a delivery to every webhook that wants ``job``'s final state, in ``session``'s
    transaction (the caller's, which also writes that state)."""
    event = _event(job, failure)
    model = session.get(ModelRow, job.model_id) if job.model_id else None
    if model is None:  # a round's job (an adversary run): no submission to tell about
        return
    mine = and_(WebhookRow.model_id.is_(None), WebhookRow.owner_id == model.owner_id)
    hooks = session.scalars(select(WebhookRow).where(or_(WebhookRow.model_id == model.id, mine)))
    for hook in hooks:
        if event not in hook.events.split():
            continue
        delivery_id = str(uuid.uuid4())
        payload = _payload(delivery_id, event, job, model, now, failure, result)
        session.add(_outbox_row(delivery_id, hook.id, event, payload, now, max_attempts))


def forget_model(session: Session, model_id: str) -> None:
    """Remove the webhooks of one submission (it is being deleted) with their deliveries."""
    _forget(session, WebhookRow.model_id == model_id)


def updated(session: Session, statement: Update) -> int:
    """How many rows an UPDATE changed (store.leases has the same; importing it would be a
    cycle, as store.leases writes this outbox)."""
    return cast(CursorResult[Any], session.execute(statement)).rowcount


def _forget(session: Session, condition: Any) -> int:
    ids = session.scalars(select(WebhookRow.id).where(condition)).all()
    if ids:
        session.execute(delete(WebhookDeliveryRow).where(WebhookDeliveryRow.webhook_id.in_(ids)))
        session.execute(delete(WebhookRow).where(WebhookRow.id.in_(ids)))
    return len(ids)


def _event(job: JobRow, failure: Failure | None) -> str:
    if job.status == JobStatus.DONE:
        return DONE
    return CANCELLED if failure is not None and failure.code == FailureCode.CANCELLED else FAILED


def _payload(
    delivery_id: str,
    event: str,
    job: JobRow,
    model: ModelRow,
    now: datetime,
    failure: Failure | None,
    result: EvaluationResult | None,
) -> WebhookPayload:
    """What a receiver gets: never the model's log tail, which may hold held-out data."""
    payload: WebhookPayload = {
        "id": delivery_id,
        "event": event,
        "created_at": _iso(now),
        "submission": {
            "id": model.id,
            "task": model.task,
            "name": model.name,
            "status": str(job.status),
            "job_id": job.id,
            "submitted_at": _iso(model.created_at),
            "started_at": _iso(job.started_at),
            "finished_at": _iso(job.finished_at or now),
        },
    }
    if failure is not None:
        payload["failure"] = {"code": str(failure.code), "message": failure.message}
    if result is not None:
        payload["scores"] = {k: result.summary[k] for k in _SUMMARY_AXES if k in result.summary}
        payload["metric"] = result.summary.get("metric")
        payload["rounds"] = [_event_round(r) for r in result.rounds]
    return payload


def _event_round(row: RoundRow) -> EventRound:
    return {"round": row.get("round"), "performance": row.get("performance"),
            "robustness": row.get("robustness"), "fairness": row.get("fairness")}  # fmt: skip


def _outbox_row(
    delivery_id: str,
    webhook_id: str,
    event: str,
    payload: WebhookPayload,
    now: datetime,
    max_attempts: int,
) -> WebhookDeliveryRow:
    return WebhookDeliveryRow(
        id=delivery_id,
        webhook_id=webhook_id,
        event=event,
        payload=payload,
        status=PENDING,
        attempts=0,
        max_attempts=max_attempts,
        next_attempt_at=now,
        history=[],
        created_at=now,
    )


def _due(now: datetime) -> tuple[Any, ...]:
    return (WebhookDeliveryRow.status == PENDING, WebhookDeliveryRow.next_attempt_at <= now)


def _candidates(session: Session, now: datetime, limit: int) -> list[str]:
    query = (
        select(WebhookDeliveryRow.id)
        .where(*_due(now))
        .order_by(WebhookDeliveryRow.next_attempt_at, WebhookDeliveryRow.created_at)
        .limit(limit)
    )
    if session.bind.dialect.name == "postgresql":  # type: ignore[union-attr]
        query = query.with_for_update(skip_locked=True)
    return list(session.scalars(query).all())


def _due_delivery(session: Session, delivery_id: str, token: str, sealer: Sealer) -> DueDelivery:
    row = session.get(WebhookDeliveryRow, delivery_id, populate_existing=True)
    hook = session.get(WebhookRow, row.webhook_id) if row else None
    if row is None or hook is None:
        raise LookupError("a claimed delivery vanished inside its claim")
    return DueDelivery(
        row.id,
        hook.id,
        hook.url,
        row.event,
        cast(WebhookPayload, dict(row.payload)),  # as _payload or ping wrote it
        row.attempts,
        token,
        sealer.open(hook.secret),
    )


def _webhook(row: WebhookRow) -> Webhook:
    return Webhook(
        row.id, row.owner_id, row.model_id, row.url, tuple(row.events.split()), row.created_at
    )


def _delivery(row: WebhookDeliveryRow) -> DeliveryInfo:
    return {
        "id": row.id,
        "event": row.event,
        "status": row.status,
        "attempts": row.attempts,
        "max_attempts": row.max_attempts,
        "last_status_code": row.last_status_code,
        "last_error": row.last_error,
        "next_attempt_at": _iso(row.next_attempt_at) if row.status == PENDING else None,
        "last_attempt_at": _iso(row.last_attempt_at),
        "created_at": _iso(row.created_at),
        "history": list(row.history),
    }


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat() + "Z"
