"""The chaos scenarios: what runs, on which backend, how hard it is shaken, and for how long.

Worker processes (``tests/chaos/run_worker.py``: ``dynaeval worker`` with a 3 s lease) run
fast ``process``-runtime models (``tests/fixtures/chaos_model.py``) on a cheap task
(``tests/fixtures/chaos_configs``). A scenario names the backend, the jobs, the workers (an
id and a lock folder each: two workers under one id in different lock folders are two hosts
with one hostname) and the faults of its seeded plan (tests/chaos/plan.py).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from configs.paths import CONFIG_DIR
from tests.conftest import FIXTURES

MODEL = FIXTURES / "chaos_model.py"
TASK = "chaos"  # tests/fixtures/chaos_configs: the toy data, evaluated cheaply
LEASE_S = 3.0
HEARTBEAT_S = 0.5
POLL_S = 0.2
GRACE_S = 5.0  # Worker(grace_s=...) where the worker takes one
OUTAGE_S = 2 * LEASE_S + 1.0  # longer than a lease, by a margin


@dataclass(frozen=True)
class Scenario:
    backend: str
    jobs: int
    worker_ids: tuple[str, ...]
    lock_dirs: tuple[str, ...]  # one per worker: a shared name is one host
    kills: int
    db_restart: bool
    outage: str | None  # "server": PostgreSQL down; "lock": SQLite's write lock held
    seed: int
    drain_s: float  # every job final within this, or the test reports what is left
    owners: int = 4
    outage_s: float = OUTAGE_S
    stops: bool = True  # SIGTERM busy workers while running (a graceful stop and a "now")
    keeps_results: bool = False  # no worker dies: every finished evaluation must be stored
    retry_first_s: float = 0.5  # the workers' first back-off after a platform fault


POSTGRES = Scenario(
    backend="postgresql",
    jobs=200,
    worker_ids=("chaos-w0", "chaos-w1", "chaos-twin", "chaos-twin"),
    lock_dirs=("host-a", "host-a", "host-a", "host-b"),
    kills=10,
    db_restart=True,
    outage="server",
    seed=20261123,
    drain_s=150.0,
)
# A store outage of ten leases (as 10 minutes is to the 60 s lease in production), with no
# worker dying: the workers hold what they finished and record it once the store is back, so
# no finished evaluation is lost or run twice. The production back-off (5 s) gives the holder
# its head start over a re-claim.
LONG_OUTAGE = Scenario(
    backend="postgresql",
    jobs=40,
    worker_ids=("chaos-w0", "chaos-w1", "chaos-w2"),
    lock_dirs=("host-a", "host-a", "host-a"),
    kills=0,
    db_restart=False,
    outage="server",
    seed=20261125,
    drain_s=120.0,
    outage_s=10 * LEASE_S,
    stops=False,
    keeps_results=True,
    retry_first_s=5.0,
)
SQLITE = Scenario(
    backend="sqlite",
    jobs=60,
    worker_ids=("chaos-w0", "chaos-w1"),
    lock_dirs=("host-a", "host-a"),
    kills=4,
    db_restart=False,  # no server to restart
    outage="lock",
    seed=20261124,
    # 37 s alone; beside the suite's other processes on a slow machine (Docker on
    # fuse-overlayfs) its 60 jobs went at one a second and 75 s ran out with 23 left
    drain_s=150.0,
)


def chaos_config_dir(target: Path) -> Path:
    """The shipped defaults, the ``chaos`` task and the toy datasets it reads."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(CONFIG_DIR / "defaults.yaml", target / "defaults.yaml")
    shutil.copytree(FIXTURES / "chaos_configs" / "tasks", target / "tasks")
    shutil.copytree(FIXTURES / "configs" / "datasets", target / "datasets")
    return target
