"""Why a sandboxed model died or stopped answering, as an :class:`ExitReason`.

Causes are checked in order: the hard wall-clock stop, an OOM kill, the pids limit, a full
``/tmp``, and else the exit code. The engine's state is read together with the cgroup's
counters, the peaks sampled while the model ran, ``/tmp``'s free space and the log.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from typing import Any

from configs.schema import Limits
from configs.vocabulary.failures import FailureCode
from evaluator.runtimes.docker.cgroups import ContainerCgroup, ResourceMeter, memory_limit_bytes
from evaluator.runtimes.runtime import ExitReason

DISK_FULL_MARKERS = ("No space left on device", "[Errno 28]", "ENOSPC")
_NEAR_MEMORY_LIMIT = 0.9  # with exit code 137 (SIGKILL), this close to the limit is an OOM kill
_TMP_FREE_MIN = 0.02
_LOG_TAIL_BYTES = 8192

State = Mapping[str, Any]


def hard_timeout(limit_s: float) -> ExitReason:
    """The sandbox was removed by its hard-stop timer."""
    return ExitReason(
        FailureCode.TOTAL_TIMEOUT,
        f"the sandbox's hard wall-clock limit of {limit_s:.0f} s was reached",
    )


def keepalive_expired(window_s: float) -> ExitReason:
    """The guard heard from no owner for its keep-alive window (an engine or worker stall)
    and ended the run: the platform's fault."""
    return ExitReason(
        FailureCode.PLATFORM_ERROR,
        f"the sandbox ended itself after {window_s:.0f} s without its worker's keep-alive "
        "(the worker or the engine stalled); the job is retried",
    )


def killed_from_outside(signal: str) -> ExitReason:
    """The model or its guard was killed by someone outside the sandbox: not the model's
    doing, so the platform's fault (retried, never charged)."""
    return ExitReason(
        FailureCode.PLATFORM_ERROR,
        f"the model's sandbox was killed from outside (signal {signal}: `docker kill`, an "
        "operator or the host), not by anything the model did; the job is retried",
    )


def diagnose(
    state: State,
    limits: Limits,
    cgroup: ContainerCgroup,
    meter: ResourceMeter,
    *,
    current_state: Callable[[], State | None],
    logs_tail: Callable[[int], str],
) -> ExitReason | None:
    """The reason for the container in ``state`` (the engine's ``State``); None while it
    runs and no limit explains its silence.

    ``current_state`` and ``logs_tail`` ask the engine again; they are called only when the
    cheaper checks before them found nothing.
    """
    running = bool(state.get("Running"))
    if _oom_killed(state, running, cgroup, meter.peak_bytes, limits):
        return ExitReason(
            FailureCode.OOM_KILLED,
            f"the model was killed for exceeding its memory limit of {limits.memory_gib:g} GiB",
        )
    if _pids_exhausted(cgroup, meter.peak_pids, limits.pids):
        return ExitReason(
            FailureCode.PIDS_EXHAUSTED,
            f"the model hit its limit of {limits.pids} processes/threads",
        )
    if _disk_full(current_state() or {}, logs_tail):
        return ExitReason(
            FailureCode.DISK_FULL,
            f"the model filled its {limits.tmpfs_mib} MiB /tmp",
        )
    if running:
        return None
    return ExitReason(FailureCode.CRASHED, f"the model exited with code {_exit_code(state)}")


def _exit_code(state: State) -> int:
    return int(state.get("ExitCode") or 0)


def _oom_killed(
    state: State, running: bool, cgroup: ContainerCgroup, peak_bytes: int, limits: Limits
) -> bool:
    oom_kills = cgroup.oom_kills()
    near_limit = peak_bytes >= _NEAR_MEMORY_LIMIT * memory_limit_bytes(limits)
    killed = not running and _exit_code(state) == 137
    return bool(state.get("OOMKilled") or oom_kills or (killed and near_limit))


def _pids_exhausted(cgroup: ContainerCgroup, peak_pids: int, limit: int) -> bool:
    if cgroup.pids_limit_hits() > 0:
        return True
    return max(cgroup.pids_high_water(), peak_pids) >= limit


def _disk_full(state: State, logs_tail: Callable[[int], str]) -> bool:
    pid = int(state.get("Pid") or 0)
    if pid:
        with contextlib.suppress(OSError):
            vfs = os.statvfs(f"/proc/{pid}/root/tmp")
            if vfs.f_blocks and vfs.f_bavail / vfs.f_blocks < _TMP_FREE_MIN:
                return True
    logs = logs_tail(_LOG_TAIL_BYTES)
    return any(marker in logs for marker in DISK_FULL_MARKERS)
