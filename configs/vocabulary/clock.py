"""Time as a dependency: leases, heartbeats and back-off read an injectable clock, so tests
move time forward instead of sleeping."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Now, as a naive UTC datetime (the form the database stores)."""

    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock."""

    def now(self) -> datetime:
        return datetime.now(UTC).replace(tzinfo=None)


class ManualClock:
    """A clock that moves only when told to: for tests, simulations and benchmarks."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        """Move forward by ``seconds`` and return the new time."""
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now


SYSTEM_CLOCK = SystemClock()
