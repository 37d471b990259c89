"""The assembled service: database, job store, blob store, tasks, embedded workers.

``dynaeval serve`` and the tests build one of these; production deployments build the
same pieces from other URLs (PostgreSQL, S3) and run workers in other processes.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

from configs.paths import CONFIG_DIR
from configs.schema import TaskSpec
from configs.settings import load_settings
from configs.vocabulary.clock import SYSTEM_CLOCK, Clock
from configs.vocabulary.runtimes import StoredRuntime
from configs.yamltext import parse_yaml
from evaluator.collection import LivePool
from evaluator.inputs.datasets import load_examples
from evaluator.inputs.perturbed_sets import dataset_hash
from evaluator.runtimes.docker.references import (
    allow_registries_for_pulls,
    allowed_registries_from_env,
)
from evaluator.runtimes.specs import DockerSpec, ProcessSpec
from evaluator.tasks import TaskCatalog
from store.backfill import BackfillPlan, queue_backfills
from store.blobs import BlobStore, default_blob_store
from store.db import Database, default_data_dir, default_database_url, make_private_dir
from store.jobs import JobStore
from store.queries import Queries
from store.ratelimits import RateLimits
from store.sealing import Sealer
from store.webhooks import WebhookStore
from worker.capabilities import detect
from worker.sandboxes import REAP_EVERY_S, SandboxReaper

if TYPE_CHECKING:  # the worker (and the evaluator, pandas) load only where workers run:
    from worker.worker import Worker  # a CLI command on accounts or tokens starts faster

log = logging.getLogger(__name__)
_LIVE_LOCK = threading.Lock()
LIVE_REAP_S = 30.0  # how often idle live models are looked for (their idle_s is 300 s)


@dataclass
class Service:
    """Everything the API and the embedded workers share."""

    db: Database
    blobs: BlobStore
    # a TaskCatalog (the database's current specs) when opened; tests may pass a dict
    tasks: Mapping[str, TaskSpec]
    config_dir: Path = CONFIG_DIR
    allow_local_runtimes: bool = False
    workers: list[Worker] = field(default_factory=list)
    _hashes: dict[tuple[str, int], dict[str, str]] = field(default_factory=dict)
    instance: str = "default"  # names this service's embedded workers (see start_workers)
    threads: list[threading.Thread] = field(default_factory=list)
    clock: Clock = SYSTEM_CLOCK  # the one clock of the store and the embedded workers
    # registries on local networks (loopback, private, link-local, *.local names) that
    # submissions may name: "host" or "host:port" (DYNAEVAL_ALLOWED_REGISTRIES, comma-separated)
    allowed_registries: tuple[str, ...] = ()
    # writes per user and logins per client address (tests set small ones)
    rate_limits: RateLimits = RateLimits()
    max_dataset_bytes: int = 64 * 2**20  # a held-out set uploaded through the API
    upload_part_bytes: int = 16 * 2**20  # a resumable upload's parts (S3: at least 5 MiB)
    _live: LivePool | None = None  # collection's running models, started on first use
    _reaper_stop: threading.Event = field(default_factory=threading.Event)
    # seals webhook secrets at rest (the settings' secret_key, else the data folder's own)
    sealer: Sealer = field(default_factory=Sealer.ephemeral)

    @property
    def live(self) -> LivePool:
        """The models answering writers of collection rounds (tests may set their own)."""
        with _LIVE_LOCK:  # two first writes at once must not start two pools
            if self._live is None:
                budget = load_settings().live_model_budget
                self._live = LivePool(self.blobs, budget=budget, clock=self.clock)
                self._live.start_reaper(LIVE_REAP_S)
            return self._live

    @live.setter
    def live(self, pool: LivePool) -> None:
        self._live = pool

    def stop_live(self, model_ids: Iterable[str]) -> list[str]:
        """Stop these live models if they run (never starting the pool to do it)."""
        pool = self._live
        return [] if pool is None else pool.stop_models(model_ids)

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
        make_private_dir(data_dir)
        db = Database(database_url or default_database_url(data_dir))
        sealer = Sealer.for_data_dir(data_dir, load_settings().secret_key)
        WebhookStore(db, sealer).seal_plaintext()
        blobs = default_blob_store(data_dir)
        service = cls(
            db,
            blobs,
            TaskCatalog.open(db, blobs, clock=clock, config_dir=config_dir),
            config_dir,
            allow_local_runtimes,
            # A restarted service gets the same worker ids (and so cleans up after its
            # predecessor); two services on other data folders never share one.
            instance=hashlib.blake2b(str(data_dir.resolve()).encode(), digest_size=4).hexdigest(),
            clock=clock,
            sealer=sealer,
            allowed_registries=tuple(
                default_allowed_registries() if allowed_registries is None else allowed_registries
            ),
        )
        for task in service.tasks.values():
            service.store.register_task(task.name, task.version, task.public_dict())
        return service

    @property
    def catalog(self) -> TaskCatalog | None:
        """The tasks as a database-backed catalog (None when built from a plain dict)."""
        return self.tasks if isinstance(self.tasks, TaskCatalog) else None

    @property
    def store(self) -> JobStore:
        return JobStore(self.db, self.clock)

    @property
    def queries(self) -> Queries:
        return Queries(self.db)

    def start_workers(self, count: int = 1, **options: Any) -> None:
        """Run ``count`` embedded workers in daemon threads."""
        from worker.worker import Worker, default_worker_id

        allow_registries_for_pulls(self.allowed_registries)  # they pull what the API accepted
        # they claim what this machine can run (and what needs nothing), each with a GPU
        # share of its own: two jobs on one machine never get the same GPU
        if "capabilities" in options:  # None: the workers take only jobs that need nothing
            machine = options.pop("capabilities")
        else:
            machine = detect() if count else None
        for index in range(count):
            if machine is not None:
                options["capabilities"] = machine.share(index, count)
            worker = Worker(
                self.store,
                self.blobs,
                self.tasks,
                config_dir=self.config_dir,
                worker_id=default_worker_id(f"embedded-{self.instance}-{index}"),
                clock=self.clock,
                sealer=self.sealer,
                **options,
            )
            thread = threading.Thread(target=worker.work, name=f"worker-{index}", daemon=True)
            thread.start()
            self.workers.append(worker)
            self.threads.append(thread)

    def start_sandbox_reaper(self, every_s: float = REAP_EVERY_S) -> None:
        """Without embedded workers, this process still removes sandboxes whose lease is
        dead (a killed worker's), as every worker does: an API-only server reaps too."""
        reaper = SandboxReaper(self.store, self.clock, f"serve-{self.instance}")
        stopping = self._reaper_stop

        def run() -> None:
            while not stopping.wait(every_s):
                reaper.maybe_reap(force=True)

        thread = threading.Thread(target=run, name="sandbox-reaper", daemon=True)
        thread.start()
        self.threads.append(thread)

    def sweep_unfinished_writes(self) -> int:
        """Remove the temporary files that writes killed half-way left in the blob store
        (an upload, a kept board, predictions), a day after anything last wrote to them;
        ``serve`` and ``worker`` do it once as they start, in the background. A failure is
        logged: a later start sweeps again."""
        now = self.clock.now().replace(tzinfo=UTC).timestamp()
        try:
            removed = self.blobs.sweep_unfinished(now)
        except OSError:
            log.warning("sweeping unfinished writes failed", exc_info=True)
            return 0
        if removed:
            log.info("removed %d files that writes killed half-way left behind", removed)
        return removed

    def stop_workers(self, timeout: float = 30.0) -> None:
        self._reaper_stop.set()
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

    def held_examples(self) -> dict[str, dict[str, Any]]:
        """The examples an earlier start held and never released (it was stopped while their
        images built), to be released now: model id -> catalog entry. A held model the
        catalog no longer lists is removed (it never ran: nothing of it is lost)."""
        catalog = {(entry["task"], entry["name"]): entry for entry in self._examples()}
        found: dict[str, dict[str, Any]] = {}
        for model_id, key in self.store.held_models().items():
            if key in catalog:
                found[model_id] = catalog[key]
            else:
                self.store.discard_held(model_id)
        return found

    def _examples(self) -> list[dict[str, Any]]:
        return [entry for entry in example_catalog() if entry["task"] in self.tasks]

    def dataset_hashes(self, task_name: str) -> dict[str, str]:
        """``{"round/dataset": hash}`` of the task's current held-out sets (read once per
        task version)."""
        task = self.tasks[task_name]
        key = (task_name, task.version)
        if key not in self._hashes:
            self._hashes[key] = {
                f"{spec.name}/{dataset.name}": dataset_hash(
                    load_examples(task, dataset, self.config_dir)
                )
                for spec in task.rounds
                for dataset in spec.datasets
            }
        return self._hashes[key]

    def rescore_stale(self, task_names: Iterable[str] | None = None) -> list[str]:
        """Queue a backfill of every model whose newest result was computed on other rounds
        or data than its task has now (a round added, a dataset fixed or frozen): one job per
        model scoped to the stale sets, none for a model already queued or running or whose
        image is gone, claimed after new submissions (``BACKFILL_PRIORITY``). Returns the
        queued job ids; ``plan_backfill`` also says whom it skipped."""
        jobs: list[str] = []
        for task_name in self.tasks if task_names is None else task_names:
            jobs += self.plan_backfill(task_name).jobs
        return jobs

    def plan_backfill(self, task_name: str) -> BackfillPlan:
        """The backfill of one task (see ``rescore_stale``)."""
        candidates = self.queries.rescoring_candidates(task_name)
        return queue_backfills(self.store, candidates, self.dataset_hashes(task_name))

    def close(self) -> None:
        self.stop_workers()
        if self._live is not None:
            self._live.close()
        self.db.dispose()


def default_allowed_registries() -> list[str]:
    """The operator's allow-list of local-network registries: ``DYNAEVAL_ALLOWED_REGISTRIES``
    (``host`` or ``host:port``, comma-separated)."""
    return allowed_registries_from_env()


def example_catalog(config_dir: Path = CONFIG_DIR) -> list[dict[str, Any]]:
    """The example models listed in ``configs/examples.yaml``."""
    data = parse_yaml((config_dir / "examples.yaml").read_text(encoding="utf-8"))
    return list(data["models"])


def example_image(entry: dict[str, Any]) -> str:
    """The local image tag the example build script gives this catalog entry."""
    suffix = f"-{entry['task']}" if entry.get("args") else ""
    return f"dynaeval-example/{entry['dir']}{suffix}:latest"


def example_runtime(entry: dict[str, Any], kind: str) -> StoredRuntime:
    """The runtime spec of an example model for the ``process`` or ``docker`` runtime."""
    if kind == "docker":
        return DockerSpec(image=example_image(entry)).to_dict()
    script = f"examples/models/{entry['dir']}/model.py"
    command = (sys.executable, script, *map(str, entry.get("args", [])))
    return ProcessSpec(command=command, cwd=".").to_dict()
