"""What makes a calibration server's numbers known: its service time and its resident size.

Shared by the three servers (stdlib, FastAPI, Flask); standard library only, so each image
just copies this file beside its server. Configured by environment variables:

* ``DYNAEVAL_CAL_SERVICE_MS`` (default 4): busy CPU per example, spun on the wall clock, so
  a batch of n takes n × this whatever the scheduler does: the true throughput is
  1000 / this examples/s.
* ``DYNAEVAL_CAL_RESIDENT_MIB`` (default 0: no padding): the whole process's resident size
  (VmRSS: interpreter, framework and padding together) is held at this many MiB.
* ``DYNAEVAL_CAL_LABEL`` (default ``positive``): the label answered for every instance.
* ``DYNAEVAL_CAL_HOST`` (default ``0.0.0.0``) and ``PORT`` (default 8080): where to listen.
"""

from __future__ import annotations

import mmap
import os
import threading
import time
from typing import Any

MIB = 1024 * 1024
PAGE = mmap.PAGESIZE
_CHUNK_MAX = 16 * MIB  # pad in pieces, so a surplus can be handed back piece by piece
_TOLERANCE = MIB // 2  # closer than this to the target is on target
_REGULATE_EVERY_S = 0.25


def service_seconds() -> float:
    """Busy time per example, in seconds."""
    return float(os.environ.get("DYNAEVAL_CAL_SERVICE_MS", "4")) / 1000.0


def resident_target_bytes() -> int:
    """The resident size to hold, in bytes (0: leave the process as it is)."""
    return int(float(os.environ.get("DYNAEVAL_CAL_RESIDENT_MIB", "0")) * MIB)


def label() -> str:
    """The label answered for every instance."""
    return os.environ.get("DYNAEVAL_CAL_LABEL", "positive")


def address() -> tuple[str, int]:
    """(host, port) to listen on."""
    return os.environ.get("DYNAEVAL_CAL_HOST", "0.0.0.0"), int(os.environ.get("PORT", "8080"))


def busy_until(deadline: float) -> None:
    """Spin (never sleep) until ``perf_counter()`` reaches ``deadline``."""
    while time.perf_counter() < deadline:
        pass


def predict(instances: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One prediction per instance, each after exactly ``service_seconds()`` of spinning.

    Deadlines count from the batch's start, so per-example loop overhead never accumulates.
    """
    per_example = service_seconds()
    answer = label()
    started = time.perf_counter()
    predictions = []
    for position, instance in enumerate(instances):
        busy_until(started + (position + 1) * per_example)
        predictions.append({"uid": instance.get("uid"), "label": answer})
    return predictions


def resident_bytes() -> int:
    """This process's resident size now (VmRSS), from /proc/self/statm."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


class ResidentPad:
    """Anonymous mappings that top the process up to a target resident size, and keep it there.

    Mappings (not Python objects) so a released piece really leaves the process: malloc
    would keep freed heap memory resident. A thread re-checks every quarter second, because
    the framework keeps allocating after start (first requests, thread stacks, buffers).
    """

    def __init__(self, target_bytes: int) -> None:
        self.target = target_bytes
        self._pieces: list[mmap.mmap] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def settle(self) -> None:
        """Add or release padding until the resident size is within tolerance of the target."""
        with self._lock:
            for _ in range(1000):  # bounded: each step moves at least a page
                gap = self.target - resident_bytes()
                room = self.target - self.padded()  # never pad past the target itself
                if gap > _TOLERANCE and room >= PAGE:
                    self._add(min(gap, room, _CHUNK_MAX))
                elif gap < -_TOLERANCE and self._pieces:
                    self._release(-gap)
                else:
                    return

    def padded(self) -> int:
        """Bytes of padding held now."""
        return sum(len(piece) for piece in self._pieces)

    def _add(self, size: int) -> None:
        size = max(PAGE, size - size % PAGE)
        piece = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        for offset in range(0, size, PAGE):  # touch every page: mapped is not resident
            piece[offset] = 1
        self._pieces.append(piece)

    def _release(self, surplus: int) -> None:
        piece = self._pieces.pop()
        if len(piece) > surplus:
            self._add(len(piece) - surplus)  # keep what is still needed, as a smaller piece
        piece.close()

    def hold(self) -> ResidentPad:
        """Settle now (before the server answers /health), then keep settling."""
        if self.target <= 0:
            return self
        self.settle()
        threading.Thread(target=self._regulate, name="resident-pad", daemon=True).start()
        return self

    def _regulate(self) -> None:
        while not self._stop.wait(_REGULATE_EVERY_S):
            self.settle()

    def stop(self) -> None:
        """Stop regulating (the padding stays)."""
        self._stop.set()


def hold_resident() -> ResidentPad:
    """Pad this process to ``DYNAEVAL_CAL_RESIDENT_MIB`` and keep it there."""
    return ResidentPad(resident_target_bytes()).hold()
