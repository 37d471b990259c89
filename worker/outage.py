"""A worker and an unreachable store: one warning when it goes, one info line when it is
back, and a capped, doubling wait in between (no traceback per poll: an outage is not a
bug). ``open_when_reachable`` lets a worker start while the database is still down."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import InterfaceError, OperationalError

log = logging.getLogger(__name__)

T = TypeVar("T")


def is_unreachable(exc: BaseException) -> bool:
    """A database that is down or busy (retry), as opposed to one refusing the data."""
    return isinstance(exc, OperationalError | InterfaceError)


def describe(exc: BaseException) -> str:
    """An exception in one short line: its type and the first line of its text."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


class StoreHealth:
    """Whether the store answers, as a whole worker sees it: every path that calls the
    store (the loop, heartbeats, recording, the webhook sender) reports here, so an
    outage is one warning when it starts and one line when it ends, whoever noticed."""

    def __init__(self, worker_id: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.worker_id, self.clock = worker_id, clock
        self._lock = threading.Lock()
        self._down_since: float | None = None

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def failed(self, exc: BaseException, extra: dict[str, str] | None = None) -> None:
        extra = extra or {"worker_id": self.worker_id}
        if not is_unreachable(exc):  # not an outage: a bug worth its traceback
            log.error("worker %s: store call failed", self.worker_id, exc_info=exc, extra=extra)
            return
        with self._lock:
            if self._down_since is not None:
                return
            self._down_since = self.clock()
        log.warning(
            "worker %s cannot reach the store (%s); retrying with back-off",
            self.worker_id,
            describe(exc),
            extra=extra,
        )

    def reached(self, extra: dict[str, str] | None = None) -> None:
        with self._lock:
            since, self._down_since = self._down_since, None
        if since is not None:
            log.info(
                "worker %s reaches the store again after %.0f s",
                self.worker_id,
                self.clock() - since,
                extra=extra or {"worker_id": self.worker_id},
            )


class Outage:
    """One path's view of an unreachable store: how long to wait before its next call.
    What is logged is the worker's ``StoreHealth``'s (shared by all its paths)."""

    def __init__(
        self,
        worker_id: str,
        poll_s: float,
        max_poll_s: float = 30.0,
        job_id: str | None = None,
        health: StoreHealth | None = None,
    ) -> None:
        self.worker_id = worker_id
        # the structured-log fields of every line this outage logs
        self.extra = {"worker_id": worker_id} | ({"job_id": job_id} if job_id else {})
        self.poll_s, self.max_poll_s = poll_s, max(poll_s, max_poll_s)
        self.health = health or StoreHealth(worker_id)
        self.down = False
        self._failures = 0

    def failed(self, exc: BaseException) -> float:
        """Note a failed store call; returns the seconds to wait before the next one."""
        self.health.failed(exc, self.extra)
        self.down = self.down or is_unreachable(exc)
        delay = min(self.max_poll_s, self.poll_s * 2.0 ** min(self._failures, 32))
        self._failures += 1
        return delay

    def reached(self) -> None:
        """Note a store call that worked (the health says so once after an outage)."""
        self.health.reached(self.extra)
        self.down, self._failures = False, 0


def open_when_reachable(
    open_store: Callable[[], T],
    *,
    worker_id: str = "worker",
    poll_s: float = 1.0,
    max_poll_s: float = 30.0,
    stopping: threading.Event | None = None,
) -> T:
    """``open_store()`` once the database answers: while it is unreachable, wait (doubling
    up to ``max_poll_s``) and try again. Any other error, or ``stopping`` being set while
    waiting, is raised (the last unreachable error in the latter case)."""
    outage, stopping = Outage(worker_id, poll_s, max_poll_s), stopping or threading.Event()
    while True:
        try:
            opened = open_store()
        except Exception as exc:
            if not is_unreachable(exc):
                raise
            if stopping.wait(outage.failed(exc)):
                raise
            continue
        outage.reached()
        return opened
