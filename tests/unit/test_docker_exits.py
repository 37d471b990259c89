"""Why a sandboxed model died, from the engine's state, the cgroup, the peaks and the log
(no engine needed: a fake cgroup tree and a fake state)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from configs.schema import Limits
from configs.vocabulary.failures import FailureCode
from evaluator.runtimes.docker import cgroups, exits
from evaluator.runtimes.docker.cgroups import ContainerCgroup, ResourceMeter
from evaluator.runtimes.runtime import ExitReason

CID = "0123abcd"
LIMITS = Limits(memory_gib=1.0, pids=32, tmpfs_mib=8)


@pytest.fixture(autouse=True)
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", tmp_path)
    return tmp_path


def cgroup_files(root: Path, controller: str, files: dict[str, str]) -> None:
    folder = root / controller / "docker" / CID
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def diagnose(
    state: dict[str, Any], *, peak_bytes: int = 0, peak_pids: int = 0, log: str = ""
) -> tuple[ExitReason | None, list[str]]:
    """The diagnosis, and which of the engine's lazy probes it asked."""
    asked: list[str] = []
    no_engine: Any = SimpleNamespace()  # the diagnosis reads only the meter's peaks
    meter = ResourceMeter(no_engine)
    meter.peak_bytes, meter.peak_pids = peak_bytes, peak_pids

    def current_state() -> dict[str, Any]:
        asked.append("state")
        return state

    def logs_tail(max_bytes: int) -> str:
        asked.append("logs")
        return log[-max_bytes:]

    reason = exits.diagnose(
        state,
        LIMITS,
        ContainerCgroup(CID),
        meter,
        current_state=current_state,
        logs_tail=logs_tail,
    )
    return reason, asked


def exited(code: int, **extra: Any) -> dict[str, Any]:
    return {"Running": False, "ExitCode": code, "Pid": 0, **extra}


def test_the_engines_oom_flag_is_an_oom_kill_and_asks_nothing_more() -> None:
    reason, asked = diagnose(exited(137, OOMKilled=True))
    assert reason == ExitReason(
        FailureCode.OOM_KILLED, "the model was killed for exceeding its memory limit of 1 GiB"
    )
    assert asked == []


def test_an_oom_kill_of_a_child_is_seen_in_the_cgroup(root: Path) -> None:
    cgroup_files(root, "memory", {"memory.oom_control": "under_oom 0\noom_kill 1\n"})
    reason, _ = diagnose({"Running": True, "Pid": 0})
    assert reason is not None and reason.code is FailureCode.OOM_KILLED


@pytest.mark.parametrize(("peak", "code"), [(0.95, "oom_killed"), (0.5, "crashed")])
def test_sigkill_near_the_memory_limit_is_an_oom_kill(peak: float, code: str) -> None:
    reason, _ = diagnose(exited(137), peak_bytes=int(peak * 1024**3))
    assert reason is not None and reason.code.value == code


def test_the_pids_limit(root: Path) -> None:
    cgroup_files(root, "pids", {"pids.events": "max 3\n"})
    reason, asked = diagnose(exited(1))
    assert reason == ExitReason(
        FailureCode.PIDS_EXHAUSTED, "the model hit its limit of 32 processes/threads"
    )
    assert asked == []


@pytest.mark.parametrize(("peak", "code"), [(32, "pids_exhausted"), (31, "crashed")])
def test_the_pids_limit_reached_at_a_sampled_peak(peak: int, code: str) -> None:
    reason, _ = diagnose(exited(1), peak_pids=peak)
    assert reason is not None and reason.code.value == code


def test_a_full_tmp_is_seen_in_the_log() -> None:
    reason, asked = diagnose(exited(1), log="OSError: [Errno 28] No space left on device")
    assert reason == ExitReason(FailureCode.DISK_FULL, "the model filled its 8 MiB /tmp")
    assert asked == ["state", "logs"]


def test_otherwise_the_exit_code() -> None:
    reason, _ = diagnose(exited(3))
    assert reason == ExitReason(FailureCode.CRASHED, "the model exited with code 3")


def test_a_running_model_within_its_limits_has_no_reason() -> None:
    assert diagnose({"Running": True, "Pid": 0})[0] is None


def test_the_hard_stop() -> None:
    assert exits.hard_timeout(90.0) == ExitReason(
        FailureCode.TOTAL_TIMEOUT, "the sandbox's hard wall-clock limit of 90 s was reached"
    )
