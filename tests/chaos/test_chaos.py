"""Chaos: jobs keep their promises while workers and the database misbehave.

Worker processes run many cheap jobs while a seeded plan kills, stops and duplicates them
and restarts the database and takes it away (once for two leases amid kills, once for ten
leases with no worker dying, where no finished result may be lost); afterwards every job
must be done exactly once. Elsewhere in this folder: concurrent first starts
(test_first_start.py); ``docker kill`` of a model mid-job is in
tests/integration/test_docker_worker.py, beside the engine fixtures it needs.
The parts: tests/chaos/scenario.py (the two scenarios), tests/chaos/harness.py (the fork
server's workers and their logs), tests/chaos/plan.py (the fault plan and its execution),
tests/chaos/invariants.py (the checks and the failure report).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from multiprocessing import forkserver
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any

import psutil
import pytest
from sqlalchemy import create_engine, text

from configs.paths import REPO_ROOT
from tests.chaos.harness import Event, model_processes, parent_pid
from tests.chaos.invariants import check, diagnosis, stale_writes
from tests.chaos.plan import ChaosRun
from tests.chaos.run_worker import PRELOAD
from tests.chaos.scenario import LONG_OUTAGE, POSTGRES, SQLITE, Scenario
from tests.postgres import Cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def forks() -> Iterator[ForkServerContext]:
    """A fork server that imported the worker's modules once; stopped after the module."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    try:
        yield context
    finally:
        stop = getattr(getattr(forkserver, "_forkserver", None), "_stop", None)
        if callable(stop):
            stop()


def new_database(cluster: Cluster) -> str:
    """A new database in the module's own cluster (not ``fresh_database``: its admin
    connection would not survive the restarts; the cluster goes away with the module)."""
    name = f"chaos_{uuid.uuid4().hex[:12]}"
    admin = create_engine(cluster.url(), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return cluster.url(name)


@contextlib.contextmanager
def chaos(
    scenario: Scenario,
    tmp_path: Path,
    url: str,
    cluster: Cluster | None,
    forks: ForkServerContext,
) -> Iterator[ChaosRun]:
    run = ChaosRun(scenario, tmp_path, url, cluster, forks)
    try:
        yield run
    finally:
        run.cleanup()


def run_scenario(run: ChaosRun) -> None:
    run.submit_jobs()
    run.make_plan()
    run.drive()
    run.stop_all()
    broken, info, bad = check(run)
    elapsed = time.monotonic() - run.t0
    summary = "\n".join([f"chaos on {run.s.backend}: {run.s.jobs} jobs, {elapsed:.0f} s", *info])
    (run.tmp / "report.txt").write_text(
        summary + "\n" + "\n".join(broken) + diagnosis(run, bad), encoding="utf-8"
    )
    print(summary)
    if broken:
        pytest.fail(
            f"{len(broken)} chaos invariants broken:\n- "
            + "\n- ".join(broken)
            + f"\n{summary}"
            + diagnosis(run, bad)
            + f"\n(files in {run.tmp})",
            pytrace=False,
        )


@pytest.mark.timeout(280)
def test_chaos_postgresql(chaos_cluster: Cluster, forks: ForkServerContext, tmp_path: Path) -> None:
    url = new_database(chaos_cluster)
    with chaos(POSTGRES, tmp_path, url, chaos_cluster, forks) as run:
        run_scenario(run)


@pytest.mark.timeout(200)
def test_a_store_outage_of_ten_leases_loses_no_finished_result(
    chaos_cluster: Cluster, forks: ForkServerContext, tmp_path: Path
) -> None:
    """As a 10-minute outage is to the 60 s lease: the workers that finished meanwhile hold
    their results and record them once the store is back; none is lost or run again."""
    url = new_database(chaos_cluster)
    with chaos(LONG_OUTAGE, tmp_path, url, chaos_cluster, forks) as run:
        run_scenario(run)


@pytest.mark.timeout(280)  # a 150 s drain, the stops, the checks and their report
def test_chaos_sqlite(forks: ForkServerContext, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    with chaos(SQLITE, tmp_path, url, None, forks) as run:
        run_scenario(run)


def test_the_holder_check_sees_a_write_after_another_claim() -> None:
    """The one-holder invariant is not vacuous: a heartbeat that began after another
    process's claim had returned is caught; a write that began before it is not."""

    def event(t: float, t0: float, pid: int, kind: str, answer: Any) -> Event:
        return Event(t, t0, pid, str(pid), kind, "J", answer, None)

    events = [
        event(10.0, 9.9, 1, "claim", {"id": "J", "attempt": 1}),
        event(20.0, 19.9, 2, "claim", {"id": "J", "attempt": 2}),
        event(22.0, 19.95, 1, "finish", True),  # began before the other claim returned
        event(21.0, 20.5, 1, "heartbeat", True),  # began after: stale
        event(21.5, 21.0, 1, "heartbeat", False),  # refused: harmless
        event(23.0, 22.5, 2, "finish", True),
    ]
    found = stale_writes(events)
    assert len(found) == 1 and "J heartbeat by pid 1" in found[0], found


def test_a_worker_killed_while_it_starts_a_model_leaves_no_model() -> None:
    """The chaos run's "no model left" invariant at its sharpest: a worker SIGKILLed while
    its process runtime starts the model (between the fork and the model's exec) must not
    leave the model running. The chaos run hits that window only now and then; this probe
    (tests/chaos/kill_during_start.py) aims at it sixty times."""
    marker = f"dynaeval-chaos-start-{uuid.uuid4().hex[:12]}"
    command = [sys.executable, "-m", "tests.chaos.kill_during_start", "--marker", marker]
    orphans: list[str] = []
    probe = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = probe.communicate(timeout=120)
        assert probe.returncode == 0, output
        deadline = time.monotonic() + 5.0  # the parent-death signal is asynchronous
        while model_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        orphans = [f"pid {p.pid} ppid {parent_pid(p)}" for p in model_processes(marker)]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(probe.pid, signal.SIGKILL)  # the probe and any child it left
        probe.wait(timeout=10)
        for process in model_processes(marker):
            with contextlib.suppress(psutil.Error):
                process.kill()
    assert not orphans, (
        f"{len(orphans)} of 60 workers killed while starting a model left it running, "
        f"reparented: {', '.join(orphans[:8])} (the child arms PR_SET_PDEATHSIG after its "
        "parent may already be dead: evaluator/runtimes/process.py _die_with)"
    )
