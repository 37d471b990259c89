"""The tasks this evaluator can run: task YAML checked against the metrics and
perturbations registered here (the spec layer itself imports no plugin package), and the
``TaskCatalog``: each task's current spec as stored in the database, seeded by the files."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, overload

from configs import loader
from configs.loader import BLOB_PREFIX
from configs.paths import CONFIG_DIR, TASKS_DIR
from configs.schema import ConfigError, TaskSpec
from configs.vocabulary.clock import SYSTEM_CLOCK, Clock
from evaluator.inputs.datasets import file_digest
from evaluator.scoring.spbleu import install_from_environment
from metrics.metric import REGISTRY as METRICS
from metrics.outputs import OUTPUT_TYPES
from perturbations.perturbation import DECLARATIONS as PERTURBATIONS
from store.blobs import BlobStore
from store.db import Database
from store.outages import DATABASE_OUTAGES, outage_reason
from store.tasks import ConcurrentChange, NewDataset, StoredDataset, StoredSpec, TaskVersions

PLUGINS = loader.Plugins(metrics=METRICS, perturbations=PERTURBATIONS, outputs=OUTPUT_TYPES)
# every process that loads tasks (API, worker, CLI) offers spBLEU alike, or none does
install_from_environment()
REFRESH_S = 5.0  # how stale a catalog may be before it looks for new versions again
ATTEMPTS = 3  # a change that meets a concurrent one is re-read and tried again this often
log = logging.getLogger(__name__)


def load_tasks(tasks_dir: Path = TASKS_DIR) -> dict[str, TaskSpec]:
    """Every task under ``tasks_dir`` by name; a broken file raises ConfigError."""
    return loader.load_tasks(PLUGINS, tasks_dir)


def load_task(path: str | Path, config_dir: Path | None = None) -> TaskSpec:
    """One task file, merged over the defaults, validated."""
    return loader.load_task(path, PLUGINS, config_dir)


class TaskCatalog(Mapping[str, TaskSpec]):
    """Each task's current spec, read from the database and re-read when another process
    writes a new version: looked for at most every ``refresh_s`` seconds of the clock, and
    always by ``get`` (a worker's lookup at claim time, so a job runs on the version
    current then). Behaves as a read-only mapping of task name to TaskSpec."""

    def __init__(
        self,
        db: Database,
        blobs: BlobStore,
        *,
        clock: Clock = SYSTEM_CLOCK,
        config_dir: Path = CONFIG_DIR,
        refresh_s: float = REFRESH_S,
    ) -> None:
        self.versions = TaskVersions(db, clock)
        self.blobs, self.clock, self.config_dir = blobs, clock, config_dir
        self.refresh_s = refresh_s
        self._specs: dict[str, TaskSpec] = {}
        self._checked: datetime | None = None
        self._lock = threading.RLock()

    @classmethod
    def open(
        cls, db: Database, blobs: BlobStore, *, clock: Clock = SYSTEM_CLOCK, **options: Any
    ) -> TaskCatalog:
        """A catalog seeded from ``config_dir``'s task files, then read from the database."""
        catalog = cls(db, blobs, clock=clock, **options)
        catalog.seed(catalog.config_dir / "tasks")
        catalog.refresh()
        return catalog

    # -- the mapping ---------------------------------------------------------------------------
    def __getitem__(self, name: str) -> TaskSpec:
        self._refresh_when_due()
        return self._specs[name]

    def __iter__(self) -> Iterator[str]:
        self._refresh_when_due()
        return iter(dict(self._specs))

    def __len__(self) -> int:
        self._refresh_when_due()
        return len(self._specs)

    def __contains__(self, name: object) -> bool:
        self._refresh_when_due()
        return name in self._specs

    def __setitem__(self, name: str, spec: TaskSpec) -> None:
        """Pin ``spec`` in this process only (tests tighten a limit this way); the stored
        versions are untouched, and the next version stored replaces the pin."""
        with self._lock:
            self._specs = {**self._specs, name: spec}

    @overload
    def get(self, name: str, /) -> TaskSpec | None: ...
    @overload
    def get(self, name: str, /, default: TaskSpec | Any) -> TaskSpec | Any: ...
    def get(self, name: str, /, default: Any = None) -> Any:
        """The task's spec as stored now (its version looked up on every call). While the
        database is unreachable, the spec this process read last: a job claimed just before
        an outage runs on it, and its result is held through the outage, rather than failing
        on the lookup and running again after it."""
        try:
            self.refresh(name)
        except DATABASE_OUTAGES as exc:
            if name not in self._specs:
                raise
            log.warning(
                "task %s: the store is unreachable (%s); using version %s, read before",
                name, outage_reason(exc), self._specs[name].version,
            )  # fmt: skip
        return self._specs.get(name, default)

    # -- versions ------------------------------------------------------------------------------
    def refresh(self, name: str | None = None) -> None:
        """Read the specs whose stored version differs from ours (one task, or all)."""
        with self._lock:
            if name is None:
                latest = self.versions.latest_versions()
                self._checked = self.clock.now()
            else:
                found = self.versions.latest_version(name)
                latest = {} if found is None else {name: found}
            changed = {t: v for t, v in latest.items() if self._version(t) != v}
            if not changed:
                return
            specs = dict(self._specs)
            for task in changed:
                parsed = self._load(task)
                if parsed is not None:
                    specs[task] = parsed
            self._specs = specs  # swapped whole: readers never see a half-made dict

    def stored(self, name: str) -> StoredSpec:
        """The stored spec of ``name`` as written (what a change starts from)."""
        found = self.versions.current(name)
        if found is None:
            raise KeyError(name)
        return found

    def change(
        self, base: StoredSpec, spec: dict[str, Any], reason: str, dataset: NewDataset | None
    ) -> tuple[TaskSpec, StoredDataset | None]:
        """Validate ``spec`` and store it as the version after ``base`` with ``dataset``;
        ConfigError when it is invalid, ConcurrentChange when ``base`` is no longer current."""
        version = base.version + 1
        task = self.parse({**spec, "version": version}, f"task {base.task!r} v{version}")
        added = self.versions.write(
            base.task, version, spec, seed_hash=base.seed_hash, reason=reason, dataset=dataset
        )
        self.refresh(base.task)
        return task, added

    def create(self, spec: dict[str, Any], datasets: Sequence[NewDataset], reason: str) -> TaskSpec:
        """Store a new task's ``spec`` (merged over the defaults) as its version 1 with
        ``datasets`` (their blobs stored already). ConfigError when invalid;
        ConcurrentChange when the task exists."""
        spec = {**spec, "version": 1}
        task = self.parse(spec, "the uploaded spec")
        self.versions.write(task.name, 1, spec, seed_hash="", reason=reason, more=datasets)
        self.refresh(task.name)
        return task

    def parse(
        self, spec: Mapping[str, Any], source: str, resolve: Callable[[str], Path] | None = None
    ) -> TaskSpec:
        """A stored spec validated by the loader that validates every task file (blob keys
        read through ``resolve``, by default the blob store's local copies)."""
        return loader.parse_task(
            spec, PLUGINS, self.config_dir, source, resolve or self.blobs.local_path
        )

    def seed(self, tasks_dir: Path) -> None:
        """Store each task file's spec as a version when the file is new or changed since
        its last seeding; rounds and datasets added through the API are carried over."""
        for task in load_tasks(tasks_dir).values():
            raw = loader.read_task(Path(task.source), self.config_dir)
            digest = _digest(raw)
            current = self.versions.current(task.name)
            if current is not None and current.seed_hash == digest:
                continue
            spec, version = raw, task.version
            if current is not None:
                spec = carry_over(raw, current.spec)
                version = max(current.version + 1, task.version)
                self.parse({**spec, "version": version}, f"{task.source} (with API rounds)")
            reason = "seeded from its file" if current is None else "its file changed"
            try:
                self.versions.write(task.name, version, spec, seed_hash=digest, reason=reason)
            except ConcurrentChange:  # another process seeded the same file meanwhile
                log.info("task %s: version %s was written by another process", task.name, version)

    def _version(self, name: str) -> int | None:
        found = self._specs.get(name)
        return None if found is None else found.version

    def _refresh_when_due(self) -> None:
        checked = self._checked
        if checked is None or (self.clock.now() - checked).total_seconds() >= self.refresh_s:
            self.refresh()

    def _load(self, name: str) -> TaskSpec | None:
        stored = self.versions.current(name)
        if stored is None:
            return None
        try:
            return self.parse(stored.spec, f"task {name!r} v{stored.version} (database)")
        except ConfigError as exc:  # e.g. a task of another deployment's files: keep ours
            log.warning("task %s version %s cannot be loaded here: %s", name, stored.version, exc)
            return None


class RoundError(ValueError):
    """A round change refused: ``code`` is unknown_round, round_exists, invalid_round or
    concurrent_change; nothing was stored."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def put_dataset(
    catalog: TaskCatalog, task_name: str, new: NewDataset, *, new_round: bool, weight: float | None
) -> tuple[int, bool]:
    """Put ``new`` (already in the blob store) in its round, making the round when
    ``new_round`` (with ``weight``); returns (task version, whether a version was written).
    The same content under that name already writes nothing."""
    for _ in range(ATTEMPTS):
        base = catalog.stored(task_name)
        spec = copy.deepcopy(base.spec)
        entry = _target_round(spec, new, new_round, weight, task_name)
        current = next((d for d in entry["datasets"] if d.get("name") == new.name), None)
        if current is not None and _same_content(catalog, task_name, current, new):
            return base.version, False
        if new_round and current is not None:
            raise _exists(new.round)
        if current is None:
            entry["datasets"].append({"name": new.name, "path": BLOB_PREFIX + new.blob_key})
        else:  # a file-backed set counts as its name's version 1
            new = dataclasses.replace(new, previous=0 if _blob_backed(current) else 1)
            current["path"] = BLOB_PREFIX + new.blob_key
        reason = f"round {new.round}: dataset {new.name} sha256 {new.sha256[:12]}"
        if _written(catalog, base, spec, reason, new):
            return base.version + 1, True
    raise RoundError("concurrent_change", f"task {task_name!r} kept changing: try again")


def put_weight(
    catalog: TaskCatalog, task_name: str, round_name: str, weight: float
) -> tuple[int, bool]:
    """Set a round's weight; returns (task version, whether a version was written)."""
    for _ in range(ATTEMPTS):
        base = catalog.stored(task_name)
        spec = copy.deepcopy(base.spec)
        entry = next((r for r in spec["rounds"] if r.get("name") == round_name), None)
        if entry is None:
            raise RoundError("unknown_round", f"task {task_name!r} has no round {round_name!r}")
        if float(entry.get("weight", 1.0)) == weight:
            return base.version, False
        entry["weight"] = weight
        if _written(catalog, base, spec, f"round {round_name} weight {weight}", None):
            return base.version + 1, True
    raise RoundError("concurrent_change", f"task {task_name!r} kept changing: try again")


def _written(
    catalog: TaskCatalog,
    base: StoredSpec,
    spec: dict[str, Any],
    reason: str,
    dataset: NewDataset | None,
) -> bool:
    """Whether the change was stored (False: a concurrent one won; read again)."""
    try:
        catalog.change(base, spec, reason, dataset)
    except ConcurrentChange:
        return False
    except ConfigError as exc:
        raise RoundError("invalid_round", f"{exc.field}: {exc.problem}") from None
    return True


def _target_round(
    spec: dict[str, Any], new: NewDataset, new_round: bool, weight: float | None, task_name: str
) -> dict[str, Any]:
    """The round entry the set goes to, made (at the end) for a new round."""
    rounds: list[dict[str, Any]] = spec["rounds"]
    found = next((r for r in rounds if r.get("name") == new.round), None)
    if found is not None:
        # Asking for a new round again is fine only as the same upload (then a no-op).
        if new_round and not any(d.get("name") == new.name for d in found["datasets"]):
            raise _exists(new.round)
        return found
    if not new_round:
        raise RoundError("unknown_round", f"task {task_name!r} has no round {new.round!r}")
    entry: dict[str, Any] = {"name": new.round, "datasets": []}
    if weight is not None:
        entry["weight"] = weight
    rounds.append(entry)
    return entry


def _same_content(
    catalog: TaskCatalog, task_name: str, current: dict[str, Any], new: NewDataset
) -> bool:
    """Whether the set now under that name has the new content's hash."""
    path = str(current.get("path", ""))
    if path.startswith(BLOB_PREFIX):
        return path == BLOB_PREFIX + new.blob_key
    digest = file_digest(catalog[task_name], catalog.config_dir / path)
    return digest.sha256 == new.sha256


def _exists(round_name: str) -> RoundError:
    return RoundError("round_exists", f"round {round_name!r} exists: add datasets to it instead")


def carry_over(files: Mapping[str, Any], stored: Mapping[str, Any]) -> dict[str, Any]:
    """A task file's new spec with the blob-backed rounds and datasets of the stored one
    that the file does not name (the API's additions survive a change of the file)."""
    spec = copy.deepcopy(dict(files))
    rounds = spec.get("rounds")
    if not isinstance(rounds, list):
        return spec
    by_name = {r.get("name"): r for r in rounds if isinstance(r, dict)}
    for old in stored.get("rounds", []):
        added = [d for d in old.get("datasets", []) if _blob_backed(d)]
        if not added:
            continue
        target = by_name.get(old.get("name"))
        if target is None:
            rounds.append({**old, "datasets": added})
            continue
        names = {d.get("name") for d in target.get("datasets", [])}
        target["datasets"] = [
            *target.get("datasets", []),
            *[d for d in added if d["name"] not in names],
        ]
    return spec


def _blob_backed(dataset: Any) -> bool:
    return isinstance(dataset, dict) and str(dataset.get("path", "")).startswith(BLOB_PREFIX)


def _digest(raw: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()
