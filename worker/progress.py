"""What the evaluation thread and the heartbeat thread of one job share: its progress, when
its lease was last renewed, and whether the job must stop (lease lost or handed back)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from evaluator.errors import EvaluationStopped


class LeaseLost(EvaluationStopped, RuntimeError):
    """This worker no longer holds the job it is running (lost, or handed back)."""


class Progress:
    """Progress of one running job, safe to share between threads."""

    def __init__(self, claimed_at: datetime) -> None:
        self._lock = threading.Lock()
        self._fraction, self._stage = 0.0, "starting"
        self._last_beat = claimed_at
        self.finished = threading.Event()  # the outcome is recorded (or left to the lease)
        self.lost = threading.Event()  # the job is not ours any more: stop at the next step
        self.tick = threading.Event()  # wakes the heartbeat thread before its next beat
        self.recording = threading.Event()  # evaluated: a stop no longer hands the job back
        self.handing_back = threading.Event()  # a stop's grace ran out: the job goes back
        self.handed_back = False  # the store took it back (set before the heartbeat ends)

    def update(self, fraction: float, stage: str) -> None:
        """Called by the evaluation at every step; ends it once the lease is lost (the
        runtime is still stopped: the pipeline stops it whatever ends the run)."""
        if self.lost.is_set():
            raise LeaseLost("the job's lease was lost or handed back; this run must stop")
        with self._lock:
            self._fraction, self._stage = fraction, stage

    def snapshot(self) -> tuple[float, str]:
        with self._lock:
            return self._fraction, self._stage

    def renewed(self, at: datetime) -> None:
        """The store renewed the lease as of ``at`` (the clock read before asking)."""
        with self._lock:
            self._last_beat = max(self._last_beat, at)

    def lease_deadline(self, lease_s: float) -> datetime:
        """When the lease runs out unless renewed again: no point in retrying past it."""
        with self._lock:
            return self._last_beat + timedelta(seconds=lease_s)

    def end(self) -> None:
        """Stop the heartbeat thread."""
        self.finished.set()
        self.tick.set()
