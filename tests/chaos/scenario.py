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
SQLITE = Scenario(
    backend="sqlite",
    jobs=60,
    worker_ids=("chaos-w0", "chaos-w1"),
    lock_dirs=("host-a", "host-a"),
    kills=4,
    db_restart=False,  # no server to restart
    outage="lock",
    seed=20261124,
    drain_s=75.0,
)


def chaos_config_dir(target: Path) -> Path:
    """The shipped defaults, the ``chaos`` task and the toy datasets it reads."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(CONFIG_DIR / "defaults.yaml", target / "defaults.yaml")
    shutil.copytree(FIXTURES / "chaos_configs" / "tasks", target / "tasks")
    shutil.copytree(FIXTURES / "configs" / "datasets", target / "datasets")
    return target
