"""The chaos run's workers: processes forked from a fork server, their logs and event logs.

Workers are forked from a fork server that imported the worker's modules once (a fresh
interpreter spends seconds of CPU importing the evaluator's scientific stack, and there are
some twenty starts per run on two cores); each runs ``run_worker.main`` in its own session.
Each worker position (a slot) keeps its id and lock folder across restarts; its output goes
to ``worker-N.log`` and its queue calls to ``worker-N.events.jsonl`` in ``tmp_path``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import time
import uuid
from dataclasses import dataclass
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import psutil

from tests.chaos.run_worker import forked_main
from tests.chaos.scenario import (
    GRACE_S,
    HEARTBEAT_S,
    LEASE_S,
    POLL_S,
    Scenario,
    chaos_config_dir,
)

STOP_WAIT_S = GRACE_S + 2 * LEASE_S + 10.0  # how long a SIGTERM'd worker may take to exit
MAX_UNEXPECTED_EXITS = 12  # restarts of workers that ended on their own, then give up


@dataclass
class Slot:
    """One worker position: restarted under the same id and lock folder after each end."""

    index: int
    worker_id: str
    lock_dir: Path
    log_path: Path
    events_path: Path
    proc: BaseProcess | None = None
    starts: int = 0
    signalled: str | None = None  # what the test sent the current process: KILL or TERM
    signalled_at: float = 0.0
    restart_at: float | None = None

    @property
    def name(self) -> str:
        return f"slot{self.index}({self.worker_id}@{self.lock_dir.name})"

    @property
    def pid(self) -> int:
        assert self.proc is not None and self.proc.pid is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.exitcode is None


@dataclass
class Event:
    """One line of a worker's event log (tests/chaos/run_worker.py)."""

    t: float  # when the call returned
    t0: float  # when it began
    pid: int
    slot: str
    kind: str
    job: str | None
    answer: Any
    error: str | None

    @property
    def wrote(self) -> bool:
        """A queue write that took effect for this process's hold of the job."""
        if self.error is not None:
            return False
        if self.kind in ("heartbeat", "finish", "finish_late", "release"):
            return self.answer is True
        return self.kind == "fail" and self.answer is not None


class WorkerHarness:
    """The worker slots of one run: started, watched, killed and restarted, with the run's
    clock, seeded randomness, timeline and findings (``ChaosRun`` in tests/chaos/plan.py
    adds the plan, the database and the stops)."""

    def __init__(
        self,
        scenario: Scenario,
        tmp_path: Path,
        url: str,
        forks: ForkServerContext,
    ) -> None:
        self.forks = forks
        self.scenario = scenario
        self.tmp = tmp_path
        self.url = url
        self.rng = random.Random(scenario.seed)
        self.marker = f"dynaeval-chaos-{uuid.uuid4().hex[:12]}"
        self.t0 = time.monotonic()
        self.wall0 = time.time()  # the same instant on the wall clock (events, processes)
        self.timeline: list[str] = []
        self.findings: list[str] = []  # problems seen while running
        self.kills: list[tuple[float, str, str | None]] = []  # wall time, slot, job it held
        self.stopping = False
        self.unexpected_exits = 0
        self.data = tmp_path / "data"
        self.config_dir = chaos_config_dir(tmp_path / "configs")
        self.slots = [
            Slot(
                index,
                worker_id,
                tmp_path / "locks" / lock,
                tmp_path / f"worker-{index}.log",
                tmp_path / f"worker-{index}.events.jsonl",
            )
            for index, (worker_id, lock) in enumerate(
                zip(scenario.worker_ids, scenario.lock_dirs, strict=True)
            )
        ]

    # -- bookkeeping -------------------------------------------------------------------------
    def note(self, text: str) -> None:
        self.timeline.append(f"{time.monotonic() - self.t0:7.2f}s  {text}")

    def finding(self, text: str) -> None:
        self.findings.append(text)
        self.note(f"FINDING: {text}")

    # -- workers -----------------------------------------------------------------------------
    def start(self, slot: Slot) -> None:
        slot.lock_dir.mkdir(parents=True, exist_ok=True)
        self.data.mkdir(exist_ok=True)
        argv = [
            *("--db", self.url, "--data", str(self.data), "--config-dir", str(self.config_dir)),
            *("--id", slot.worker_id, "--slot", str(slot.index)),
            *("--events", str(slot.events_path)),
            *("--lease-s", str(LEASE_S), "--heartbeat-s", str(HEARTBEAT_S)),
            *("--poll-s", str(POLL_S), "--grace-s", str(GRACE_S)),
            *("--retry-first-s", str(self.scenario.retry_first_s)),
            *("--retry-max-s", str(max(2.0, self.scenario.retry_first_s))),
        ]
        with slot.log_path.open("a", encoding="utf-8") as log:
            log.write(f"----- start {slot.starts} -----\n")
        env = {"DYNAEVAL_LOCK_DIR": str(slot.lock_dir)}
        # `python -m tests.chaos.run_worker ARGV`, forked from a server that imported it all
        slot.proc = self.forks.Process(
            target=forked_main, args=(argv, str(slot.log_path), env), daemon=True
        )
        slot.proc.start()
        slot.starts += 1
        slot.signalled, slot.restart_at = None, None
        self.note(f"start {slot.name} pid {slot.pid}")

    def reap(self) -> None:
        """Notice ended workers, judge how they ended, restart the ones due."""
        now = time.monotonic()
        for slot in self.slots:
            proc = slot.proc
            if proc is not None and proc.exitcode is not None:
                code = proc.exitcode
                self.note(f"exit {slot.name} pid {proc.pid} code {code} ({slot.signalled})")
                if slot.signalled == "TERM":
                    if code != 0:
                        self.finding(f"{slot.name} pid {proc.pid} exited {code} after SIGTERM")
                    if slot.restart_at is None:
                        slot.restart_at = now + 0.5
                elif slot.signalled != "KILL":
                    self.unexpected_exits += 1
                    tail = log_tail(slot.log_path, 6)
                    self.finding(
                        f"{slot.name} pid {proc.pid} exited on its own with code {code}; "
                        f"log tail:\n{tail}"
                    )
                    if slot.restart_at is None:
                        slot.restart_at = now + 1.0
                proc.join(timeout=1)
                slot.proc = None
            if slot.signalled == "TERM" and slot.alive() and now - slot.signalled_at > STOP_WAIT_S:
                self.finding(
                    f"{slot.name} pid {slot.pid} still runs {STOP_WAIT_S:.0f} s after "
                    "SIGTERM; killed"
                )
                slot.signalled = "KILL"
                kill_pid(slot.pid, signal.SIGKILL)
            if (
                slot.proc is None
                and not self.stopping
                and slot.restart_at is not None
                and now >= slot.restart_at
                and self.unexpected_exits <= MAX_UNEXPECTED_EXITS
            ):
                self.start(slot)

    def holding(self, slot: Slot) -> str | None:
        """The job the slot's current process holds, from its event log."""
        if not slot.alive():
            return None
        held = None
        for event in read_events(slot.events_path):
            if event.pid != slot.pid:
                continue
            if event.kind == "claim" and isinstance(event.answer, dict):
                held = event.answer.get("id")
            elif (
                event.kind in ("finish", "fail", "release")
                and event.job == held
                and event.error is None
            ):
                held = None
        return held

    def kill(self, slot: Slot, why: str) -> None:
        job = self.holding(slot)
        kill_pid(slot.pid, signal.SIGKILL)
        slot.signalled, slot.signalled_at = "KILL", time.monotonic()
        slot.restart_at = time.monotonic() + self.rng.uniform(0.3, 1.5)
        self.kills.append((time.time(), slot.name, job))
        self.note(f"SIGKILL {slot.name} pid {slot.pid} ({why}) holding {job}")


# -- the event logs --------------------------------------------------------------------------
def read_events(path: Path) -> list[Event]:
    """The events of one log; a torn last line (a SIGKILL mid-write) is skipped."""
    if not path.exists():
        return []
    events = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            raw = json.loads(line)
        except ValueError:
            continue
        events.append(
            Event(
                float(raw["t"]),
                float(raw.get("t0", raw["t"])),
                int(raw["pid"]),
                str(raw.get("slot")),
                str(raw["event"]),
                raw.get("job"),
                raw.get("answer"),
                raw.get("error"),
            )
        )
    return events


# -- processes -------------------------------------------------------------------------------
def model_processes(marker: str) -> list[psutil.Process]:
    """Live processes (zombies excluded) whose command line holds ``marker``."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            if any(marker in part for part in process.cmdline()):
                found.append(process)
        except psutil.Error:
            continue
    return found


def parent_pid(process: psutil.Process) -> int | None:
    try:
        return process.ppid()
    except psutil.Error:
        return None


def kill_pid(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def log_tail(path: Path, lines: int) -> str:
    if not path.exists():
        return "    (no log)"
    text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return "\n".join(f"    {line}" for line in text[-lines:])
