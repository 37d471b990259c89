"""A task's rounds and held-out sets: adding a set (a new round, or a new version of one)
and changing a round's weight, for the API and for ``dynaeval rounds`` alike.

An uploaded set is streamed to a temporary file within a size limit, checked row by row
by the evaluator's own parser, then stored in the blob store under its content hash; the
task's next spec version and the dataset row are written in one transaction. Any failure
stores nothing: a blob this change created is removed. Examples and labels are never
served back."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from configs.schema import TaskSpec
from configs.vocabulary.refusals import Kind, Refused
from evaluator.inputs.datasets import DatasetError, check_file, file_digest
from evaluator.tasks import RoundError, TaskCatalog, put_dataset, put_weight
from store.collection import Collection
from store.tasks import NewDataset, StoredDataset
from usecases.service import Service

_KIND: dict[str, Kind] = {
    "unknown_round": "not_found",
    "round_exists": "conflict",
    "concurrent_change": "conflict",
    "invalid_round": "invalid",
}


class RoundRefused(Refused):
    """A round or dataset change refused (see configs.vocabulary.refusals)."""


@dataclass(frozen=True)
class Upload:
    """A held-out set on its way in: where it goes and what it is."""

    round: str
    dataset: str
    stream: IO[bytes]
    filename: str
    weight: float | None = None  # a new round's weight (None: 1.0)
    new_round: bool = False  # POST .../rounds: the round must not exist yet


@dataclass(frozen=True)
class Change:
    """What a change did: the task version now current, and whether it created anything."""

    task: str
    task_version: int
    created: bool
    round: dict[str, Any]
    dataset: dict[str, Any] | None
    backfill_jobs: tuple[str, ...] = ()  # one per model scored before the change

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "backfill_jobs": list(self.backfill_jobs)}


def add_dataset(svc: Service, task: TaskSpec, upload: Upload) -> Change:
    """Validate ``upload`` against ``task``, store it by content hash and write the task's
    next version (none when the same content is there already)."""
    catalog = _catalog(svc)
    with tempfile.TemporaryDirectory(prefix="dynaeval-dataset-") as folder:
        path = Path(folder) / "data.jsonl"
        take_upload(upload.stream, path, svc.max_dataset_bytes)
        try:
            digest = check_file(task, path, shown_name(upload.filename))
        except DatasetError as exc:
            raise RoundRefused("invalid", "invalid_dataset", str(exc)) from None
        key = f"datasets/{digest.sha256}.jsonl"
        created_blob = not svc.blobs.exists(key)
        new = NewDataset(upload.round, upload.dataset, digest.sha256, key, digest.examples)
        created = False
        try:
            if created_blob:
                with path.open("rb") as source:
                    svc.blobs.put_file(key, source)
            _, created = put_dataset(
                catalog, task.name, new, new_round=upload.new_round, weight=upload.weight
            )
        except RoundError as exc:
            raise RoundRefused(_KIND[exc.code], exc.code, exc.message) from None
        finally:  # content-addressed: removed only when no recorded set refers to it
            if created_blob and not created and not catalog.versions.blob_in_use(key):
                svc.blobs.delete(key)
    change = _change(svc, task.name, upload.round, upload.dataset, created)
    if not created:
        return change
    return replace(change, backfill_jobs=tuple(svc.rescore_stale([task.name])))


def set_weight(svc: Service, task: TaskSpec, round_name: str, weight: float) -> Change:
    """Change a round's weight (a new task version; none when it is that weight already)."""
    try:
        _, created = put_weight(_catalog(svc), task.name, round_name, weight)
    except RoundError as exc:
        raise RoundRefused(_KIND[exc.code], exc.code, exc.message) from None
    return _change(svc, task.name, round_name, None, created)


def rounds_of(svc: Service, task: TaskSpec) -> list[dict[str, Any]]:
    """Each round with its weight and its sets' hashes, sizes and versions (no examples)."""
    records = svc.catalog.versions.datasets(task.name) if svc.catalog else []
    frozen = Collection(svc.db).frozen_sets(task.name)
    identities = svc.dataset_hashes(task.name)
    rounds = []
    for spec in task.rounds:
        infos = [
            _dataset_info(svc, task, spec.name, d.name, d.path, records) for d in spec.datasets
        ]
        for info in infos:  # both identities, so one maps to the other
            info["dataset_hash"] = identities.get(f"{spec.name}/{info['name']}")
        for info in infos:  # a set a freeze wrote says so
            if frozen.get(spec.name) == info["sha256"] and info["source"] == "upload":
                info["source"] = "collected"
        rounds.append({"name": spec.name, "weight": spec.weight, "datasets": infos})
    return rounds


def _change(
    svc: Service, task_name: str, round_name: str, dataset: str | None, created: bool
) -> Change:
    """The change as answered; a new version also updates the tasks table."""
    task = _catalog(svc).get(task_name)
    assert task is not None
    if created:
        svc.store.register_task(task.name, task.version, task.public_dict())
    info = next(r for r in rounds_of(svc, task) if r["name"] == round_name)
    shown = next((d for d in info["datasets"] if d["name"] == dataset), None)
    return Change(task_name, task.version, created, info, shown)


def _dataset_info(
    svc: Service,
    task: TaskSpec,
    round_name: str,
    name: str,
    path: str,
    records: list[StoredDataset],
) -> dict[str, Any]:
    digest = file_digest(task, svc.config_dir / path)
    found = [r for r in records if (r.round, r.name, r.sha256) == (round_name, name, digest.sha256)]
    record = found[-1] if found else None
    return {
        "name": name,
        "sha256": digest.sha256,
        "examples": digest.examples,
        "version": record.version if record else 1,
        "added_at": record.added_at.isoformat() + "Z" if record else None,
        "source": "upload" if record else "file",
    }


def _catalog(svc: Service) -> TaskCatalog:
    if svc.catalog is None:
        raise RoundRefused(
            "conflict", "read_only_tasks", "this service's tasks come from files only"
        )
    return svc.catalog


def shown_name(filename: str) -> str:
    """The upload's file name as its errors quote it: the last part, printable, short."""
    name = "".join(c for c in Path(filename or "").name if c.isprintable())[:100]
    return name or "upload"


def take_upload(stream: IO[bytes], path: Path, limit: int) -> None:
    """Copy ``stream`` to ``path`` a chunk at a time, refusing more than ``limit`` bytes."""
    size = 0
    with path.open("wb") as out:
        while chunk := stream.read(1 << 16):
            size += len(chunk)
            if size > limit:
                raise RoundRefused(
                    "too_large", "dataset_too_large", f"a dataset is limited to {limit} bytes"
                )
            out.write(chunk)
    if size == 0:
        raise RoundRefused("invalid", "invalid_dataset", "the uploaded dataset is empty")
