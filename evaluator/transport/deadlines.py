"""A real deadline per HTTP request: socket timeouts bound each read, not the request.

One daemon thread per client holds the deadline of the request in flight and shuts its
socket down when the deadline passes, so a model trickling a byte at a time cannot
outlive it. Arming and disarming take a lock and, in the common case, wake no thread:
the thread sleeps until the earliest deadline it knows of and re-checks then.
"""

from __future__ import annotations

import contextlib
import math
import socket
import threading
import time


class RequestDeadline:
    """Shuts the armed socket down (``SHUT_RDWR``) once its deadline passes."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._sock: socket.socket | None = None
        self._deadline: float | None = None
        self._wake_at = math.inf  # when the thread wakes next, as far as it knows
        self._fired = False
        self._generation = 0  # bumped by stop(): a stopped thread exits, a new one may start
        self._thread: threading.Thread | None = None

    def arm(self, sock: socket.socket, deadline: float) -> None:
        """Watch ``sock`` until ``deadline`` (time.monotonic) or ``disarm``."""
        with self._cond:
            self._sock, self._deadline, self._fired = sock, deadline, False
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, args=(self._generation,), name="request-deadline", daemon=True
                )
                self._thread.start()
            elif deadline < self._wake_at:
                self._cond.notify_all()

    def disarm(self) -> bool:
        """End the watch; True when the deadline passed and the socket was shut down."""
        with self._cond:
            self._sock = self._deadline = None
            return self._fired

    def stop(self) -> None:
        """End the thread (a later ``arm`` starts a new one)."""
        with self._cond:
            self._generation += 1
            self._sock = self._deadline = None
            self._thread = None
            self._cond.notify_all()

    def _run(self, generation: int) -> None:
        with self._cond:
            while generation == self._generation:
                now = time.monotonic()
                if self._deadline is None:
                    self._wake_at = math.inf
                    self._cond.wait()
                elif now < self._deadline:
                    self._wake_at = self._deadline
                    self._cond.wait(self._deadline - now)
                else:
                    self._fire()

    def _fire(self) -> None:
        sock, self._sock, self._deadline = self._sock, None, None
        self._fired = True
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
