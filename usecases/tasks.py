"""Creating a task without a restart: a spec (YAML or JSON) and one JSONL file per dataset,
for the API and for ``dynaeval tasks create`` alike.

The spec is checked by the same parser as every task file (merged over the shared
defaults); its datasets come as uploads, never as server paths. Every file is streamed to
a temporary file within the dataset size limit and checked row by row against the parsed
spec before anything is stored; then the blobs go to the blob store under their content
hash and version 1 is written with every dataset in one transaction. Any failure stores
nothing: the blobs this creation stored are removed again.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from configs.loader import BLOB_PREFIX, load_defaults, with_defaults
from configs.schema import ConfigError, Limits, TaskSpec
from configs.vocabulary.refusals import Refused
from configs.yamltext import parse_untrusted_yaml
from evaluator.inputs.datasets import DatasetError, check_file
from store.accounts import Accounts
from store.tasks import ConcurrentChange, NewDataset
from usecases.rounds import rounds_of, shown_name, take_upload
from usecases.service import Service

MAX_SPEC_BYTES = 256 * 1024
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # a dataset's name, as for rounds
DEFAULT_DATASET = "test"


class TaskRefused(Refused):
    """A task creation refused (see configs.vocabulary.refusals); nothing was stored."""


@dataclass(frozen=True)
class DatasetFile:
    """One uploaded held-out set: its round, its dataset name and the bytes."""

    round: str
    dataset: str
    stream: IO[bytes]
    filename: str


@dataclass(frozen=True)
class _Received:
    file: DatasetFile
    path: Path
    sha256: str

    @property
    def key(self) -> str:
        return f"datasets/{self.sha256}.jsonl"


def create_task(
    svc: Service, spec_text: str, files: Sequence[DatasetFile], owner: str | None
) -> dict[str, Any]:
    """Create the task ``spec_text`` describes with ``files`` as its datasets; the caller
    (``owner``, a user name) owns it. Returns the task's public spec and its rounds."""
    catalog = svc.catalog
    if catalog is None:
        raise TaskRefused(
            "conflict", "read_only_tasks", "this service's tasks come from files only"
        )
    raw = _spec_mapping(spec_text)
    name = str(raw.get("name", ""))
    if name in svc.tasks or catalog.versions.latest_version(name) is not None:
        raise TaskRefused("conflict", "task_exists", f"a task named {name!r} exists already")
    _within_operator_bounds(raw, load_defaults(svc.config_dir))
    wanted = _datasets_named(raw)
    _match(wanted, files)
    with tempfile.TemporaryDirectory(prefix="dynaeval-task-") as folder:
        received = [_receive(svc, f, Path(folder) / f"{i}.jsonl") for i, f in enumerate(files)]
        spec = with_defaults(_with_blob_paths(raw, received), svc.config_dir)
        local = {r.key: r.path for r in received}
        task = _checked_spec(svc, spec, local)
        news = [_checked_dataset(task, item) for item in received]
        stored = _store_blobs(svc, received)
        try:
            task = catalog.create(spec, news, f"created through the API ({len(news)} datasets)")
        except ConcurrentChange:
            _remove(svc, stored)
            raise TaskRefused(
                "conflict", "task_exists", f"a task named {name!r} exists already"
            ) from None
        except BaseException:
            _remove(svc, stored)
            raise
    svc.store.register_task(task.name, task.version, task.public_dict())
    if owner is not None:
        Accounts(svc.db).set_task_access(task.name, owner, private=False)
    return {**task.public_dict(), "rounds": rounds_of(svc, task)}


def _spec_mapping(text: str) -> dict[str, Any]:
    if len(text.encode()) > MAX_SPEC_BYTES:
        raise TaskRefused(
            "too_large", "spec_too_large", f"a spec is limited to {MAX_SPEC_BYTES} bytes"
        )
    try:
        raw = parse_untrusted_yaml(text)
    except (yaml.YAMLError, RecursionError) as exc:
        raise TaskRefused(
            "invalid", "invalid_spec", f"spec: not YAML or JSON ({exc})"[:300]
        ) from None
    if not isinstance(raw, dict):
        raise TaskRefused("invalid", "invalid_spec", "spec: a mapping of task keys")
    if "version" in raw:
        raise TaskRefused("invalid", "invalid_spec", "version: a new task is version 1")
    return raw


# What an uploaded spec may ask for beyond the operator's defaults: nothing of the sandbox
# (a bigger task is configured by the operator, in the files); bounded work elsewhere.
MAX_RESAMPLES = 10_000
MAX_BATCH = 1024


def _within_operator_bounds(raw: Mapping[str, Any], defaults: Mapping[str, Any]) -> None:
    """Refuse sandbox limits above the operator's defaults and unbounded work (422)."""
    limits = raw.get("limits")
    if isinstance(limits, dict):
        for key, value in limits.items():
            # a limit the defaults file leaves out is bounded by the built-in default
            fallback = getattr(Limits(), key, None) if isinstance(key, str) else None
            _at_most(f"limits.{key}", value, defaults.get("limits", {}).get(key, fallback))
    _at_most(
        "instance_memory_gib", raw.get("instance_memory_gib"), defaults.get("instance_memory_gib")
    )
    _at_most("batch_size", raw.get("batch_size"), MAX_BATCH)
    bootstrap = raw.get("bootstrap")
    if isinstance(bootstrap, dict):
        _at_most("bootstrap.n_resamples", bootstrap.get("n_resamples"), MAX_RESAMPLES)
    profiling, shared = raw.get("profiling"), defaults.get("profiling", {})
    if isinstance(profiling, dict):
        for key in ("warmup_batches", "min_examples"):
            bound = shared.get(key)
            _at_most(f"profiling.{key}", profiling.get(key), None if bound is None else 10 * bound)


def _at_most(field: str, value: Any, bound: Any) -> None:
    numbers = (int, float)
    if isinstance(value, bool) or not isinstance(value, numbers) or not isinstance(bound, numbers):
        return  # not a number: the task-file parser names what is wrong with it
    if value > bound:
        raise _invalid_spec(
            field, f"at most {bound} for a task created here (the operator sets larger ones)"
        )


def _datasets_named(raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(round, dataset) of every dataset the spec's rounds name, in order; a round without
    a ``datasets`` list has one called ``test``. Paths are refused: data comes as files."""
    rounds = raw.get("rounds")
    if not isinstance(rounds, list) or not rounds:
        raise _invalid_spec("rounds", "a non-empty list of rounds")
    wanted = []
    for i, entry in enumerate(rounds):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise _invalid_spec(f"rounds[{i}].name", "every round needs a name")
        datasets = entry.setdefault("datasets", [{"name": DEFAULT_DATASET}])
        if not isinstance(datasets, list) or not datasets:
            raise _invalid_spec(f"rounds[{i}].datasets", "a non-empty list of datasets")
        for j, dataset in enumerate(datasets):
            where = f"rounds[{i}].datasets[{j}]"
            if not isinstance(dataset, dict) or not isinstance(dataset.get("name"), str):
                raise _invalid_spec(f"{where}.name", "every dataset needs a name")
            if "path" in dataset:
                raise _invalid_spec(f"{where}.path", "send the data as a file, not a server path")
            if not _NAME.fullmatch(dataset["name"]):
                raise _invalid_spec(f"{where}.name", "a short name: letters, digits, '_', '-', '.'")
            wanted.append((entry["name"], dataset["name"]))
    return wanted


def _match(wanted: Sequence[tuple[str, str]], files: Sequence[DatasetFile]) -> None:
    given = [(f.round, f.dataset) for f in files]
    if len(set(given)) != len(given):
        raise _invalid_data("the same round and dataset came twice")
    missing = [w for w in wanted if w not in given]
    if missing:
        raise _invalid_data(f"no file for round {missing[0][0]!r}, dataset {missing[0][1]!r}")
    extra = [g for g in given if g not in wanted]
    if extra:
        raise _invalid_data(f"round {extra[0][0]!r}, dataset {extra[0][1]!r} is not in the spec")


def _receive(svc: Service, file: DatasetFile, path: Path) -> _Received:
    take_upload(file.stream, path, svc.max_dataset_bytes)
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 16):
            digest.update(chunk)
    return _Received(file, path, digest.hexdigest())


def _with_blob_paths(raw: Mapping[str, Any], received: Sequence[_Received]) -> dict[str, Any]:
    keys = {(r.file.round, r.file.dataset): r.key for r in received}
    rounds = [
        {
            **entry,
            "datasets": [
                {**d, "path": BLOB_PREFIX + keys[(entry["name"], d["name"])]}
                for d in entry["datasets"]
            ],
        }
        for entry in raw["rounds"]
    ]
    return {**raw, "rounds": rounds}


def _checked_spec(svc: Service, spec: dict[str, Any], local: Mapping[str, Path]) -> TaskSpec:
    """The spec parsed as every task file is, its datasets read from the received files."""
    catalog = svc.catalog
    assert catalog is not None
    try:
        return catalog.parse({**spec, "version": 1}, "the spec", resolve=local.__getitem__)
    except ConfigError as exc:
        raise TaskRefused("invalid", "invalid_spec", f"{exc.field}: {exc.problem}") from None


def _checked_dataset(task: TaskSpec, item: _Received) -> NewDataset:
    """The received file checked row by row against the task (a 422 names the line)."""
    where = f"{item.file.round}/{item.file.dataset} ({shown_name(item.file.filename)})"
    try:
        digest = check_file(task, item.path, where)
    except DatasetError as exc:
        raise TaskRefused("invalid", "invalid_dataset", str(exc)) from None
    return NewDataset(item.file.round, item.file.dataset, item.sha256, item.key, digest.examples)


def _store_blobs(svc: Service, received: Sequence[_Received]) -> list[str]:
    stored = []
    try:
        for item in received:
            if item.key in stored or svc.blobs.exists(item.key):
                continue
            with item.path.open("rb") as source:
                svc.blobs.put_file(item.key, source)
            stored.append(item.key)
    except BaseException:
        _remove(svc, stored)
        raise
    return stored


def _remove(svc: Service, keys: Sequence[str]) -> None:
    catalog = svc.catalog
    for key in keys:
        if catalog is None or not catalog.versions.blob_in_use(key):
            svc.blobs.delete(key)


def _invalid_spec(field: str, problem: str) -> TaskRefused:
    return TaskRefused("invalid", "invalid_spec", f"{field}: {problem}")


def _invalid_data(problem: str) -> TaskRefused:
    return TaskRefused("invalid", "invalid_dataset", problem)
