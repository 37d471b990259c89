"""Webhook vocabulary shared by the product and its receivers: the events, the retry
schedule and the signature (``Dynaeval-Signature: t=<unix>,v1=<hex>``, an HMAC-SHA256 of
``"<t>.<body>"`` under the webhook's secret). Pure: no I/O, no clock of its own."""

from __future__ import annotations

import hashlib
import hmac
import time
from datetime import timedelta
from typing import NotRequired, TypedDict

DONE, FAILED, CANCELLED, PING = "done", "failed", "cancelled", "ping"
FINAL_EVENTS = (DONE, FAILED, CANCELLED)  # what a webhook may subscribe to
SECRET_PREFIX = "whsec_"
EVENT_HEADER, DELIVERY_HEADER, SIGNATURE_HEADER = (
    "Dynaeval-Event",
    "Dynaeval-Delivery",
    "Dynaeval-Signature",
)
# Seconds to wait after the n-th failed attempt; the last step repeats until the attempts run out.
BACKOFF_S = (10, 30, 120, 600, 3600)
DEFAULT_MAX_ATTEMPTS = 8


class EventSubmission(TypedDict):
    """The submission an event is about (times ISO 8601 UTC)."""

    id: str
    task: str
    name: str
    status: str
    job_id: str
    submitted_at: str | None
    started_at: str | None
    finished_at: str | None


class EventFailure(TypedDict):
    code: str
    message: str


class EventRound(TypedDict):
    round: str | None
    performance: float | None
    robustness: float | None
    fairness: float | None


class PingedWebhook(TypedDict):
    id: str
    model_id: str | None


class WebhookPayload(TypedDict):
    """What a receiver gets, signed: the delivery's id, its event and time, and either the
    submission (with its failure, or its scores, metric and rounds) or, for a ``ping``, the
    webhook pinged. Never a model's log tail, which may hold held-out data."""

    id: str
    event: str
    created_at: str | None
    submission: NotRequired[EventSubmission]
    failure: NotRequired[EventFailure]
    scores: NotRequired[dict[str, float | None]]
    metric: NotRequired[str | None]
    rounds: NotRequired[list[EventRound]]
    webhook: NotRequired[PingedWebhook]


def retry_delay(attempts: int) -> timedelta:
    """The wait after ``attempts`` failed attempts (1-based): 10 s, 30 s, 2 min, 10 min, 1 h..."""
    return timedelta(seconds=BACKOFF_S[min(max(attempts, 1), len(BACKOFF_S)) - 1])


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The ``Dynaeval-Signature`` header value for ``body`` sent at ``timestamp`` (unix s)."""
    return f"t={timestamp},v1={_digest(secret, body, timestamp)}"


def verify_signature(
    secret: str, header: str, body: bytes, tolerance_s: float = 300, now: float | None = None
) -> bool:
    """Whether ``header`` signs ``body`` with ``secret`` and was made within ``tolerance_s``
    of ``now`` (unix seconds; default the wall clock): the receiver's check. A replayed old
    delivery, a tampered body or a malformed header are all False, never an exception."""
    timestamp, signatures = _parse(header)
    if timestamp is None or not signatures:
        return False
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_s:
        return False
    expected = _digest(secret, body, timestamp)
    # compare_digest: a byte-by-byte early exit would leak how much of a guess was right
    return any(hmac.compare_digest(expected, candidate) for candidate in signatures)


def _digest(secret: str, body: bytes, timestamp: int) -> str:
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def _parse(header: str) -> tuple[int | None, list[str]]:
    """``(t, [v1 signatures])`` from ``t=...,v1=...[,v1=...]``; (None, []) when malformed."""
    timestamp: int | None = None
    signatures: list[str] = []
    for part in (header or "").split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == "v1" and value:
            signatures.append(value)
    return timestamp, signatures
