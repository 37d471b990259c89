"""Stopping ``serve`` and ``worker`` the same way, whichever of SIGTERM or SIGINT comes."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable


class StopSignals:
    """SIGTERM and SIGINT mean the same, for ``serve`` and ``worker``: the first stops taking
    work and lets the running job finish within the grace period, a second hands it back
    at once."""

    def __init__(
        self, who: str, grace_s: float, first: Callable[[], None], now: Callable[[], None]
    ) -> None:
        self.who, self.grace_s, self.first, self.now = who, grace_s, first, now
        self.requested = threading.Event()
        self.again = threading.Event()  # a second signal came: stop waiting for anything
        self.received: list[str] = []

    def install(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, _frame: object) -> None:
        self.received.append(signal.Signals(signum).name)
        if len(self.received) == 1:
            self._say(
                f"stopping ({self.received[0]}): no new jobs; the running job gets "
                f"{self.grace_s:g} s to finish, then goes back to the queue"
            )
            self.requested.set()
            self.first()
        else:
            self._say(f"stopping now ({self.received[-1]} again): handing the running job back")
            self.again.set()
            self.now()

    def done(self) -> None:
        """Stopped: later signals have nothing left to stop (and Python's own handlers,
        back during interpreter shutdown, would turn the exit code into a signal)."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, signal.SIG_IGN)

    def _say(self, line: str) -> None:
        # os.write, not print: a signal may arrive while the main thread is inside print.
        os.write(sys.stdout.fileno(), f"dynaeval {self.who}: {line}\n".encode())
