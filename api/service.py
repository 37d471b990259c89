"""The assembled service: database, job store, blob store, tasks, embedded workers.

``dynaeval serve`` and the tests build one of these; production deployments build the
same pieces from other URLs (PostgreSQL, S3) and run workers in other processes.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from api.ratelimit import RateLimits
from configs.paths import CONFIG_DIR
from configs.schema import TaskSpec
from configs.vocabulary.clock import SYSTEM_CLOCK, Clock
from evaluator.inputs.datasets import load_examples
from evaluator.inputs.perturbed_sets import dataset_hash
from evaluator.runtimes.specs import DockerSpec, ProcessSpec
from evaluator.tasks import load_tasks
from store.blobs import BlobStore, default_blob_store
from store.db import Database, default_data_dir, default_database_url
from store.jobs import JobStore
from store.queries import Queries
from worker.worker import Worker, default_worker_id

log = logging.getLogger(__name__)


@dataclass
class Service:
    """Everything the API and the embedded workers share."""

    db: Database
    blobs: BlobStore
    tasks: dict[str, TaskSpec]
    config_dir: Path = CONFIG_DIR
    allow_local_runtimes: bool = False
    workers: list[Worker] = field(default_factory=list)
    _hashes: dict[str, dict[str, str]] = field(default_factory=dict)
    instance: str = "default"  # names this service's embedded workers (see start_workers)
    threads: list[threading.Thread] = field(default_factory=list)
    clock: Clock = SYSTEM_CLOCK  # the one clock of the store and the embedded workers
    # registries on local networks (loopback, private, link-local, *.local names) that
    # submissions may name: "host" or "host:port" (DYNAEVAL_ALLOWED_REGISTRIES, comma-separated)
    allowed_registries: tuple[str, ...] = ()
    # writes per user and logins per client address (tests set small ones)
    rate_limits: RateLimits = RateLimits()

    @classmethod
    def open(
        cls,
        data_dir: Path | None = None,
        database_url: str | None = None,
        *,
        config_dir: Path = CONFIG_DIR,
        allow_local_runtimes: bool = False,
        clock: Clock = SYSTEM_CLOCK,
        allowed_registries: Iterable[str] | None = None,
    ) -> Service:
        """Migrate the database, load and register every task."""
        data_dir = data_dir or default_data_dir()
        data_dir.mkdir(parents=True, exist_ok=True)
        db = Database(database_url or default_database_url(data_dir))
        service = cls(
            db,
            default_blob_store(data_dir),
            load_tasks(config_dir / "tasks"),
            config_dir,
            allow_local_runtimes,
            # A restarted service gets the same worker ids (and so cleans up after its
            # predecessor); two services on other data folders never share one.
            instance=hashlib.blake2b(str(data_dir.resolve()).encode(), digest_size=4).hexdigest(),
            clock=clock,
            allowed_registries=tuple(
                default_allowed_registries() if allowed_registries is None else allowed_registries
            ),
        )
        for task in service.tasks.values():
            service.store.register_task(task.name, task.version, task.public_dict())
        return service

    @property
    def store(self) -> JobStore:
        return JobStore(self.db, self.clock)

    @property
    def queries(self) -> Queries:
        return Queries(self.db)

    def start_workers(self, count: int = 1, **options: Any) -> None:
        """Run ``count`` embedded workers in daemon threads."""
        for index in range(count):
            worker = Worker(
                self.store,
                self.blobs,
                self.tasks,
                config_dir=self.config_dir,
                worker_id=default_worker_id(f"embedded-{self.instance}-{index}"),
                clock=self.clock,
                **options,
            )
            thread = threading.Thread(target=worker.work, name=f"worker-{index}", daemon=True)
            thread.start()
            self.workers.append(worker)
            self.threads.append(thread)

    def stop_workers(self, timeout: float = 30.0) -> None:
        for worker in self.workers:
            worker.stop()
        for thread in self.threads:
            thread.join(timeout=timeout)
        self.workers.clear()
        self.threads.clear()

    def queue_examples(self, runtime_kind: str = "process") -> list[str]:
        """Submit every example model of the catalog; returns the model ids."""
        return [
            self.store.submit(entry["task"], entry["name"], example_runtime(entry, runtime_kind))[0]
            for entry in self._examples()
        ]

    def hold_examples(self) -> dict[str, dict[str, Any]]:
        """Submit every example model as held (shown as queued, taken by no worker until its
        image is built and ``store.start_held`` names its runtime); model id -> catalog entry."""
        return {
            self.store.submit(
                entry["task"], entry["name"], example_runtime(entry, "process"), held=True
            )[0]: entry
            for entry in self._examples()
        }

    def _examples(self) -> list[dict[str, Any]]:
        return [entry for entry in example_catalog() if entry["task"] in self.tasks]

    def dataset_hashes(self, task_name: str) -> dict[str, str]:
        """``{"round/dataset": hash}`` of the task's current held-out sets (read once)."""
        if task_name not in self._hashes:
            task = self.tasks[task_name]
            self._hashes[task_name] = {
                f"{spec.name}/{dataset.name}": dataset_hash(
                    load_examples(task, dataset, self.config_dir)
                )
                for spec in task.rounds
                for dataset in spec.datasets
            }
        return self._hashes[task_name]

    def rescore_stale(self) -> list[str]:
        """Queue a new evaluation of every model whose newest result was computed on other
        rounds or data than its task has now (a round added, a dataset fixed): new test
        data is scored for old models too. Returns the queued job ids."""
        jobs = []
        for task_name in self.tasks:
            current = self.dataset_hashes(task_name)
            for model_id, scored_on in self.queries.rescoring_candidates(task_name):
                if scored_on != current:
                    jobs.append(self.store.enqueue(model_id, stage="queued: task data changed"))
        return jobs

    def close(self) -> None:
        self.stop_workers()
        self.db.dispose()


def default_allowed_registries() -> list[str]:
    """The operator's allow-list of local-network registries: ``DYNAEVAL_ALLOWED_REGISTRIES``
    (``host`` or ``host:port``, comma-separated)."""
    value = os.environ.get("DYNAEVAL_ALLOWED_REGISTRIES", "")
    return [entry.strip() for entry in value.split(",") if entry.strip()]


def example_catalog(config_dir: Path = CONFIG_DIR) -> list[dict[str, Any]]:
    """The example models listed in ``configs/examples.yaml``."""
    data = yaml.safe_load((config_dir / "examples.yaml").read_text(encoding="utf-8"))
    return list(data["models"])


def example_image(entry: dict[str, Any]) -> str:
    """The local image tag the example build script gives this catalog entry."""
    suffix = f"-{entry['task']}" if entry.get("args") else ""
    return f"dynaeval-example/{entry['dir']}{suffix}:latest"


def example_runtime(entry: dict[str, Any], kind: str) -> dict[str, Any]:
    """The runtime spec of an example model for the ``process`` or ``docker`` runtime."""
    if kind == "docker":
        return DockerSpec(image=example_image(entry)).to_dict()
    script = f"examples/models/{entry['dir']}/model.py"
    command = (sys.executable, script, *map(str, entry.get("args", [])))
    return ProcessSpec(command=command, cwd=".").to_dict()
