"""Rate limits on writes and logins: token buckets on the service's clock, kept in the
database so every API process (and every container) draws from the same bucket.

Every non-GET request of a signed-in user draws from that user's write bucket (an
anonymous one from its client address's); a login draws from its address's login bucket
instead. An empty bucket is 429 ``rate_limited`` with ``Retry-After`` in seconds. A login
is a view marked with :func:`login_limited` or an endpoint named with :func:`mark_logins`.
When the database is down the take raises its outage error, which the app answers with
its 503 ``database_unavailable``."""

from __future__ import annotations

import copy
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from apispec import BasePlugin
from flask import Flask, current_app, request

from api.auth import SAFE_METHODS, principal
from api.errors import ApiError
from configs.vocabulary.clock import Clock
from store.db import Database
from store.ratelimits import RateLimits, SharedBuckets

F = TypeVar("F", bound=Callable[..., Any])
EXTENSION = "dynaeval_ratelimit"
_MAX_KEYS = 10_000  # past this many buckets, full ones are dropped (they equal a new one)


class Buckets(Protocol):
    """Where tokens are taken: :class:`SharedBuckets` in the app, :class:`TokenBuckets`
    for a single process without a database."""

    def take(self, key: str) -> float:
        """0 when a token was taken for ``key``, else the seconds until one is back."""
        ...


@dataclass
class _Bucket:
    tokens: float
    updated: datetime


class TokenBuckets:
    """One bucket per key holding up to ``capacity`` tokens, ``capacity`` per ``window_s``,
    in this process's memory (the reference behaviour :class:`SharedBuckets` matches)."""

    def __init__(self, capacity: int, window_s: float, clock: Clock) -> None:
        self.capacity, self.rate = float(capacity), capacity / window_s
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """Take one token for ``key``: 0 when granted, else the seconds until one is back."""
        now = self.clock.now()
        with self._lock:
            bucket = self._refilled(key, now)
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return 0.0
            return (1.0 - bucket.tokens) / self.rate

    def _refilled(self, key: str, now: datetime) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= _MAX_KEYS:
                self._prune(now)
            bucket = self._buckets[key] = _Bucket(self.capacity, now)
        elapsed = max(0.0, (now - bucket.updated).total_seconds())  # a clock set back adds none
        bucket.tokens = min(self.capacity, bucket.tokens + elapsed * self.rate)
        bucket.updated = max(now, bucket.updated)
        return bucket

    def _prune(self, now: datetime) -> None:
        full = self.capacity / self.rate
        for key, bucket in list(self._buckets.items()):
            if (now - bucket.updated).total_seconds() >= full:
                del self._buckets[key]


@dataclass
class Limiter:
    """The app's buckets: writes per user (or address), logins per address; and the
    endpoints that count as logins besides the views marked :func:`login_limited`."""

    writes: Buckets
    logins: Buckets
    login_endpoints: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, limits: RateLimits, clock: Clock, db: Database) -> Limiter:
        return cls(
            SharedBuckets(db, "writes", limits.writes, limits.writes_window_s, clock),
            SharedBuckets(db, "logins", limits.logins, limits.logins_window_s, clock),
        )


def install(app: Flask) -> None:
    """Limit every write; call after ``api.auth.install`` (the key is the principal)."""
    service = app.extensions["dynaeval"]
    app.extensions[EXTENSION] = Limiter.of(service.rate_limits, service.clock, service.db)
    app.before_request(_limit_write)


def mark_logins(app: Flask, *endpoints: str) -> None:
    """Count POSTs to ``endpoints`` (e.g. ``"pages.login"``) as logins: for views that
    cannot carry :func:`login_limited` (call after :func:`install`)."""
    app.extensions[EXTENSION].login_endpoints.update(endpoints)


def login_limited(func: F) -> F:
    """Mark a login view: it draws from its client address's login bucket instead of the
    write bucket (password guessing is per address, and a login has no user yet)."""
    func._dynaeval_rate = "logins"  # type: ignore[attr-defined]
    return func


def part_of_a_write(func: F) -> F:
    """Mark a view that carries a part of one write already charged (a part of a resumable
    upload, which its start paid for): a 2 GiB image is 128 parts, not 128 writes."""
    func._dynaeval_rate = "parts"  # type: ignore[attr-defined]
    return func


def _limit_write() -> None:
    if request.endpoint is None or request.method in SAFE_METHODS:
        return
    limiter, address = _limiter(), f"addr:{request.remote_addr}"
    kind = _rate_kind(request.endpoint)
    if kind == "parts":
        return
    if kind == "logins":
        _charge(limiter.logins, address, "logins")
        return
    who = principal()
    _charge(limiter.writes, f"user:{who.user_id}" if who.user_id else address, "writes")


def _rate_kind(endpoint: str) -> str | None:
    if endpoint in _limiter().login_endpoints:
        return "logins"
    view: Any = current_app.view_functions[endpoint]
    view_class = getattr(view, "view_class", None)
    if view_class is not None:  # a MethodView: the method's own handler carries the mark
        view = getattr(view_class, request.method.lower(), None)
    return getattr(view, "_dynaeval_rate", None)


def _charge(buckets: Buckets, key: str, what: str) -> None:
    wait = buckets.take(key)
    if wait > 0:
        seconds = max(1, math.ceil(wait - 1e-6))  # 30.000000001 s is still 30
        raise ApiError(
            429,
            "rate_limited",
            f"too many {what}: try again in {seconds} s",
            headers={"Retry-After": str(seconds)},
        )


def _limiter() -> Limiter:
    found: Limiter = current_app.extensions[EXTENSION]
    return found


class RateLimitDocs(BasePlugin):
    """Documents the 429 (with ``Retry-After``) on every write operation in OpenAPI."""

    def operation_helper(
        self, path: str | None = None, operations: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        for method, operation in (operations or {}).items():
            if method.upper() in SAFE_METHODS or not isinstance(operation, dict):
                continue
            responses = operation.setdefault("responses", {})
            if 429 not in responses and "429" not in responses:  # a route's own 429 stays
                responses["429"] = copy.deepcopy(RATE_LIMITED_RESPONSE)


RATE_LIMITED_RESPONSE: dict[str, Any] = {
    "description": "rate_limited: too many writes (per user) or logins (per client address); "
    "retry after the seconds in Retry-After",
    "headers": {
        "Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}},
    },
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
}
