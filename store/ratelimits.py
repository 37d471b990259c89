"""Token buckets in the database, so every API process draws from one bucket per key.

A take is one ``INSERT … ON CONFLICT DO UPDATE … RETURNING`` statement: the refill, the
decision and the new count are computed by the database on the row it holds, so concurrent
takes (threads or processes) are serialised on that row and none is lost. Times are
seconds on the caller's clock, stored as numbers so the arithmetic is the same SQL on
SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import ColumnElement, Table, case, delete, literal
from sqlalchemy.dialects import postgresql, sqlite

from configs.vocabulary.clock import Clock
from store.db import Database
from store.models import RateLimitBucketRow

_EPOCH = datetime(1970, 1, 1)  # the clock is naive UTC
_TABLE = cast(Table, RateLimitBucketRow.__table__)


@dataclass(frozen=True)
class RateLimits:
    """Requests allowed per window (a burst of that many, refilled evenly over the window)."""

    writes: int = 60
    writes_window_s: float = 60.0
    logins: int = 10
    logins_window_s: float = 60.0


def clock_seconds(moment: datetime) -> float:
    """``moment`` (naive UTC) as seconds since the epoch."""
    return (moment - _EPOCH).total_seconds()


class SharedBuckets:
    """Buckets named ``<kind>:<key>`` holding up to ``capacity`` tokens, refilled evenly at
    ``capacity`` per ``window_s``. Buckets idle for a whole window are full, so they are
    deleted (a missing row is a full bucket): the table holds only recently used keys."""

    def __init__(
        self, db: Database, kind: str, capacity: int, window_s: float, clock: Clock
    ) -> None:
        self.db, self.kind, self.clock = db, kind, clock
        self.capacity, self.window_s = float(capacity), float(window_s)
        self.rate = capacity / window_s
        self._last_prune: float | None = None

    def take(self, key: str) -> float:
        """Take one token for ``key``: 0 when granted, else the seconds until one is back."""
        now = clock_seconds(self.clock.now())
        statement = self._upsert(f"{self.kind}:{key}", now)
        with self.db.engine.begin() as connection:
            row: Any = connection.execute(statement).one()
        tokens, granted = row
        self._prune_now_and_then(now)
        return 0.0 if granted else (1.0 - float(tokens)) / self.rate

    def _upsert(self, key: str, now: float) -> Any:
        """The one statement that refills, decides and takes (see the module's docstring)."""
        fresh = self.capacity >= 1.0  # a new key starts full
        insert = (postgresql.insert if self._postgres else sqlite.insert)(_TABLE)
        insert = insert.values(
            key=key,
            tokens=self.capacity - 1.0 if fresh else self.capacity,
            updated_s=now,
            granted=fresh,
        )
        refilled = _refilled(self.capacity, self.rate, now)
        enough = refilled >= 1.0
        return insert.on_conflict_do_update(
            index_elements=[_TABLE.c.key],
            set_={
                # every SET sees the row as it was, so each is computed from the old values
                "tokens": case((enough, refilled - 1.0), else_=refilled),
                "granted": enough,
                "updated_s": case((_TABLE.c.updated_s > now, _TABLE.c.updated_s), else_=now),
            },
        ).returning(_TABLE.c.tokens, _TABLE.c.granted)

    @property
    def _postgres(self) -> bool:
        return self.db.engine.dialect.name == "postgresql"

    def _prune_now_and_then(self, now: float) -> None:
        """Delete this kind's full buckets, at most once per window per process."""
        if self._last_prune is not None and now - self._last_prune < self.window_s:
            return
        self._last_prune = now
        prune(self.db, self.kind, now - self.window_s)


def prune(db: Database, kind: str, idle_since: float) -> int:
    """Delete ``kind``'s buckets untouched since ``idle_since`` (they refilled); how many."""
    with db.engine.begin() as connection:
        result = connection.execute(
            delete(_TABLE).where(_TABLE.c.key.like(f"{kind}:%"), _TABLE.c.updated_s < idle_since)
        )
    return int(result.rowcount or 0)


def _refilled(capacity: float, rate: float, now: float) -> ColumnElement[Any]:
    """The stored tokens plus the refill since the row's last take, at most ``capacity``;
    a clock set back adds none."""
    elapsed = case((_TABLE.c.updated_s < now, literal(now) - _TABLE.c.updated_s), else_=0.0)
    grown = _TABLE.c.tokens + elapsed * rate
    return case((grown > capacity, capacity), else_=grown)
