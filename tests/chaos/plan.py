"""The chaos run's seeded fault plan and its execution.

While the workers run the jobs, the test, from a seeded plan triggered by progress:

- kills workers with SIGKILL (mostly while they hold a job) and restarts them with the same
  id after a short, random pause;
- restarts the database once (PostgreSQL: ``pg_ctl stop -m fast`` and start);
- takes the database away for longer than a lease once (PostgreSQL: the server is down;
  SQLite, which has no server: another connection holds the write lock, so every write
  waits), and kills a worker and starts it again inside that outage;
- stops one busy worker with SIGTERM and another with two (``dynaeval worker``'s "hand the
  job back now"): each must exit 0 having finished or handed back its job;
- on PostgreSQL, runs two workers under one id in different lock folders (two hosts with one
  hostname).

Then every worker is stopped with SIGTERM (tests/chaos/invariants.py checks the outcome).
SQLite's outage is a held write lock rather than a missing file: moving or hiding the file
is not clean (open connections keep the old file and its WAL, new ones would create an
empty database), while a lock held longer than a lease is a real SQLite outage.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import sys
import time
from collections import Counter
from dataclasses import dataclass
from multiprocessing.context import ForkServerContext
from pathlib import Path

import psutil
from sqlalchemy import func, select

from evaluator.runtimes.specs import ProcessSpec
from evaluator.tasks import load_tasks
from store.accounts import Accounts
from store.db import Database
from store.jobs import JobStore
from store.models import JobRow
from store.rules.principals import RESEARCHER
from tests.chaos.harness import (
    MAX_UNEXPECTED_EXITS,
    STOP_WAIT_S,
    WorkerHarness,
    kill_pid,
    model_processes,
)
from tests.chaos.scenario import MODEL, TASK, Scenario
from tests.postgres import Cluster


@dataclass
class Action:
    at_done: int  # taken once this many jobs are done
    kind: str  # kill, db_restart, outage, sigterm, sigterm_twice


@dataclass(frozen=True)
class Stop:
    """A graceful stop the test asked for: the process, the job it held, when, how."""

    pid: int
    job: str | None
    at: float  # wall time of the (first) SIGTERM
    kind: str


class ChaosRun(WorkerHarness):
    """The workers, the plan and the outages of one scenario (its checks: invariants.py)."""

    def __init__(
        self,
        scenario: Scenario,
        tmp_path: Path,
        url: str,
        cluster: Cluster | None,
        forks: ForkServerContext,
    ) -> None:
        super().__init__(scenario, tmp_path, url, forks)
        self.s = scenario
        self.cluster = cluster
        self.outage_end: float | None = None
        self.lock_conn: sqlite3.Connection | None = None
        self.stops: list[Stop] = []  # the graceful stops asked for while running
        self.plan: list[Action] = []
        self.owners: list[str] = []
        self.db = Database(url)
        self.store = JobStore(self.db)

    # -- set-up ------------------------------------------------------------------------------
    def submit_jobs(self) -> None:
        task = load_tasks(self.config_dir / "tasks")[TASK]
        self.store.register_task(task.name, task.version, task.public_dict())
        accounts = Accounts(self.db)
        self.owners = [
            accounts.add_user(f"chaos-{index}", RESEARCHER)["id"] for index in range(self.s.owners)
        ]
        # -S: the model needs only the standard library, and starts faster without site
        command = (sys.executable, "-S", str(MODEL), "--marker", self.marker)
        spec = ProcessSpec(command=command, protocol="v1").to_dict()
        for index in range(self.s.jobs):
            owner = self.owners[index % len(self.owners)]
            self.store.submit(TASK, f"chaos-{index:03d}", spec, owner_id=owner)
        self.note(f"submitted {self.s.jobs} jobs (marker {self.marker}, seed {self.s.seed})")

    def make_plan(self) -> None:
        """Actions at seeded points of progress, between 5 % and 85 % of the jobs done."""
        n = self.s.jobs
        plan = [Action(int(n * self.rng.uniform(0.05, 0.85)), "kill") for _ in range(self.s.kills)]
        if self.s.db_restart:
            plan.append(Action(int(n * 0.30), "db_restart"))
        if self.s.outage:
            plan.append(Action(int(n * 0.50), "outage"))
        if self.s.stops:
            plan.append(Action(int(n * 0.40), "sigterm_twice"))  # a second one: hand back now
            plan.append(Action(int(n * 0.70), "sigterm"))
        self.plan = sorted(plan, key=lambda action: action.at_done)
        self.note("plan: " + ", ".join(f"{a.kind}@{a.at_done}" for a in self.plan))

    # -- the database ------------------------------------------------------------------------
    def begin_outage(self) -> None:
        if self.s.outage == "server":
            assert self.cluster is not None
            self.cluster.stop("immediate")
            self.note("database DOWN (pg_ctl stop -m immediate)")
        else:
            # SQLite has no server: a long write lock is its outage (every write waits on it).
            self.lock_conn = sqlite3.connect(self.url.removeprefix("sqlite:///"), timeout=30)
            self.lock_conn.isolation_level = None
            self.lock_conn.execute("BEGIN EXCLUSIVE")
            self.note("database write-LOCKED (BEGIN EXCLUSIVE from another connection)")
        self.outage_end = time.monotonic() + self.s.outage_s
        live = [slot for slot in self.slots if slot.alive() and slot.signalled is None]
        if live and self.s.kills:  # a worker that starts inside the outage must wait for it
            self.kill(self.rng.choice(live), "inside the outage")

    def end_outage(self) -> None:
        if self.outage_end is None:
            return
        if self.s.outage == "server":
            assert self.cluster is not None
            self.cluster.start()
            self.note("database UP again")
        elif self.lock_conn is not None:
            self.lock_conn.execute("COMMIT")
            self.lock_conn.close()
            self.lock_conn = None
            self.note("database write lock released")
        self.outage_end = None

    def counts(self) -> dict[str, int] | None:
        """Jobs per status, or None while the database cannot answer."""
        if self.outage_end is not None and self.s.outage == "server":
            return None
        try:
            with self.db.session() as session:
                rows = session.execute(select(JobRow.status, func.count()).group_by(JobRow.status))
                return {str(status): int(count) for status, count in rows}
        except Exception as exc:
            self.note(f"counts unavailable: {type(exc).__name__}")
            return None

    # -- the plan ----------------------------------------------------------------------------
    def act(self, action: Action) -> bool:
        """Take ``action``; False when it must wait (e.g. no busy worker to stop)."""
        live = [slot for slot in self.slots if slot.alive() and slot.signalled is None]
        if action.kind == "kill":
            if not live:
                return False
            busy = [slot for slot in live if self.holding(slot)]
            self.kill(self.rng.choice(busy or live), "planned")
        elif action.kind == "db_restart":
            assert self.cluster is not None
            started = time.monotonic()
            self.cluster.restart("fast")
            self.note(f"database restarted (fast) in {time.monotonic() - started:.1f} s")
        elif action.kind == "outage":
            self.begin_outage()
        elif action.kind in ("sigterm", "sigterm_twice"):
            # a worker whose id is its own, caught while it holds a job
            ids = Counter(self.s.worker_ids)
            candidates = [s for s in live if ids[s.worker_id] == 1 and self.holding(s)]
            if not candidates:
                return False
            slot = self.rng.choice(candidates)
            stop = Stop(slot.pid, self.holding(slot), time.time(), action.kind)
            self.stops.append(stop)
            kill_pid(slot.pid, signal.SIGTERM)
            if action.kind == "sigterm_twice":  # `dynaeval worker`: the second one is "now"
                time.sleep(0.1)
                kill_pid(slot.pid, signal.SIGTERM)
            slot.signalled, slot.signalled_at = "TERM", time.monotonic()
            self.note(f"{action.kind} {slot.name} pid {slot.pid} holding {stop.job}")
        return True

    def calm(self) -> bool:
        """No outage and no worker on its way out after a SIGTERM."""
        return self.outage_end is None and not any(s.signalled == "TERM" for s in self.slots)

    def drive(self) -> None:
        for slot in self.slots:
            self.start(slot)
        deadline = self.t0 + self.s.drain_s
        last_action, last_shown = 0.0, 0.0
        while time.monotonic() < deadline:
            self.reap()
            if self.unexpected_exits > MAX_UNEXPECTED_EXITS and not any(
                slot.alive() for slot in self.slots
            ):
                self.finding("workers keep ending on their own; the run is given up")
                break
            if self.outage_end is not None and time.monotonic() >= self.outage_end:
                self.end_outage()
            counts = self.counts()
            if counts is not None:
                if time.monotonic() - last_shown >= 5.0:
                    self.note("jobs: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
                    last_shown = time.monotonic()
                done = counts.get("done", 0)
                final = done + counts.get("failed", 0)
                if (
                    self.plan
                    and done >= self.plan[0].at_done
                    and self.calm()
                    and time.monotonic() - last_action > 0.3
                    and self.act(self.plan[0])
                ):
                    self.plan.pop(0)
                    last_action = time.monotonic()
                if final == self.s.jobs and self.calm():
                    self.note(f"all {self.s.jobs} jobs final")
                    break
            time.sleep(0.1)
        else:
            self.note(f"drain deadline ({self.s.drain_s:.0f} s) reached")
        if self.plan:
            self.finding(
                "the chaos plan was not completed (the queue drained or time ran out first): "
                + ", ".join(f"{a.kind}@{a.at_done}" for a in self.plan)
            )

    def stop_all(self) -> None:
        """SIGTERM every worker, wait for them, kill the ones that do not stop."""
        self.stopping = True
        self.end_outage()
        for slot in self.slots:
            if slot.alive():
                kill_pid(slot.pid, signal.SIGTERM)
                slot.signalled, slot.signalled_at = "TERM", time.monotonic()
        self.note("SIGTERM to every worker (end of the run)")
        deadline = time.monotonic() + STOP_WAIT_S
        while time.monotonic() < deadline and any(slot.alive() for slot in self.slots):
            time.sleep(0.1)
        self.reap()
        for slot in self.slots:
            if slot.alive() and slot.proc is not None:
                self.finding(f"{slot.name} pid {slot.pid} ignored the final SIGTERM")
                kill_pid(slot.pid, signal.SIGKILL)
                slot.proc.join(timeout=10)
                slot.proc = None

    def cleanup(self) -> None:
        """Kill everything this run started, whatever happened (also after a failure)."""
        self.stopping = True
        for slot in self.slots:
            if slot.proc is not None and slot.proc.pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(slot.proc.pid, signal.SIGKILL)  # its own session: pgid = pid
                slot.proc.join(timeout=10)
        for process in model_processes(self.marker):
            with contextlib.suppress(psutil.Error):
                process.kill()
        if self.lock_conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self.lock_conn.close()
            self.lock_conn = None
        self.outage_end = None
        if self.cluster is not None and not self.cluster.running():
            with contextlib.suppress(Exception):  # e.g. a failure mid-outage: up again
                self.cluster.start()
        self.db.dispose()
