"""The task catalog: specs seeded from the files into the database with a version, read
back through the loader's own validation, and picked up by other processes without a
restart (at most every ``refresh_s`` on the clock, always through ``get``)."""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import yaml

from configs import loader
from configs.paths import CONFIG_DIR
from configs.schema import ConfigError
from configs.vocabulary.clock import ManualClock
from evaluator.tasks import PLUGINS, TaskCatalog, carry_over
from store.blobs import LocalBlobStore
from store.db import Database
from store.tasks import ConcurrentChange, NewDataset, TaskVersions

SMALL = {
    "name": "sentiment",
    "version": 1,
    "input_fields": ["statement"],
    "output": {"type": "label", "labels": ["positive", "negative", "neutral"]},
    "metric": "macro_f1",
    "slices": ["topic"],
    "rounds": [{"name": "r1", "datasets": [{"name": "test", "path": "datasets/s/r1.jsonl"}]}],
    "perturbations": {"robustness": [], "fairness": []},
    "profiling": {"warmup_batches": 0, "min_examples": 8, "min_queries": 4, "repeats": 1,
                  "min_duration_s": 0.01},
    "bootstrap": {"n_resamples": 20, "seed": 0},
}  # fmt: skip


def small_config(root: Path, rows: int = 20, **changes: object) -> Path:
    """A config folder with one small sentiment task (one round of ``rows`` examples)."""
    (root / "tasks").mkdir(parents=True, exist_ok=True)
    (root / "datasets" / "s").mkdir(parents=True, exist_ok=True)
    shutil.copy(CONFIG_DIR / "defaults.yaml", root / "defaults.yaml")
    source = (CONFIG_DIR / "datasets/sentiment/r1.jsonl").read_text(encoding="utf-8")
    (root / "datasets/s/r1.jsonl").write_text(
        "".join(source.splitlines(keepends=True)[:rows]), encoding="utf-8"
    )
    spec = {**copy.deepcopy(SMALL), **changes}
    (root / "tasks" / "sentiment.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    return root


@pytest.fixture
def parts(tmp_path: Path) -> tuple[Database, LocalBlobStore, Path, ManualClock]:
    db = Database(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    return db, LocalBlobStore(tmp_path / "blobs"), small_config(tmp_path / "configs"), ManualClock()


def open_catalog(parts: tuple, refresh_s: float = 5.0) -> TaskCatalog:  # type: ignore[type-arg]
    db, blobs, config_dir, clock = parts
    return TaskCatalog.open(db, blobs, clock=clock, config_dir=config_dir, refresh_s=refresh_s)


def test_the_files_seed_version_one_once(parts: tuple) -> None:  # type: ignore[type-arg]
    catalog = open_catalog(parts)
    assert list(catalog) == ["sentiment"] and "sentiment" in catalog and len(catalog) == 1
    assert catalog["sentiment"].version == 1
    open_catalog(parts)  # a second process on the same files writes nothing
    assert TaskVersions(parts[0]).latest_versions() == {"sentiment": 1}
    assert catalog.stored("sentiment").reason == "seeded from its file"


def test_a_changed_file_is_the_next_version_and_keeps_api_rounds(parts: tuple) -> None:  # type: ignore[type-arg]
    db, blobs, config_dir, _ = parts
    catalog = open_catalog(parts)
    base = catalog.stored("sentiment")
    blobs.put_bytes("datasets/abc.jsonl", (config_dir / "datasets/s/r1.jsonl").read_bytes())
    spec = copy.deepcopy(base.spec)
    spec["rounds"].append(
        {"name": "r9", "datasets": [{"name": "test", "path": "blob:datasets/abc.jsonl"}]}
    )
    catalog.change(base, spec, "test", NewDataset("r9", "test", "a" * 64, "datasets/abc.jsonl", 20))
    small_config(config_dir, weights={"performance": 1})  # the operator edits the file
    again = open_catalog(parts)
    assert again["sentiment"].version == 3
    assert [r.name for r in again["sentiment"].rounds] == ["r1", "r9"]
    assert again["sentiment"].weights["performance"] == 1.0


def test_another_process_version_is_seen_by_get_at_once_and_by_index_when_due(
    parts: tuple,  # type: ignore[type-arg]
) -> None:
    clock = parts[3]
    reader = open_catalog(parts, refresh_s=10)
    writer = open_catalog(parts)
    base = writer.stored("sentiment")
    spec = copy.deepcopy(base.spec)
    spec["rounds"][0]["weight"] = 3.0
    writer.change(base, spec, "weight", None)
    assert reader["sentiment"].version == 1  # not due yet: at most every refresh_s
    clock.advance(10)
    assert reader["sentiment"].version == 2
    spec["rounds"][0]["weight"] = 4.0
    writer.change(writer.stored("sentiment"), spec, "weight", None)
    task = reader.get("sentiment")  # a worker's lookup at claim time: always current
    assert task is not None and (task.version, task.rounds[0].weight) == (3, 4.0)
    assert reader.get("nope") is None and reader.get("nope", 5) == 5


def test_a_stored_spec_is_validated_by_the_loader(parts: tuple) -> None:  # type: ignore[type-arg]
    catalog = open_catalog(parts)
    base = catalog.stored("sentiment")
    bad = {**base.spec, "metric": "no_such_metric"}
    with pytest.raises(ConfigError, match="metric"):
        catalog.change(base, bad, "bad", None)
    missing = copy.deepcopy(base.spec)
    missing["rounds"][0]["datasets"][0]["path"] = "blob:datasets/missing.jsonl"
    with pytest.raises(ConfigError, match="cannot read"):
        catalog.change(base, missing, "bad", None)
    assert catalog.versions.latest_version("sentiment") == 1  # nothing written


def test_parse_task_is_the_file_validator(parts: tuple) -> None:  # type: ignore[type-arg]
    config_dir = parts[2]
    raw = loader.read_task(config_dir / "tasks/sentiment.yaml", config_dir)
    task = loader.parse_task(raw, PLUGINS, config_dir, str(config_dir / "tasks/sentiment.yaml"))
    assert task == loader.load_task(config_dir / "tasks/sentiment.yaml", PLUGINS, config_dir)
    raw["rounds"][0]["datasets"][0]["path"] = "blob:datasets/x.jsonl"
    with pytest.raises(ConfigError, match="needs a blob store"):
        loader.parse_task(raw, PLUGINS, config_dir, "here")


def test_two_writers_of_one_version_the_second_fails(parts: tuple) -> None:  # type: ignore[type-arg]
    catalog = open_catalog(parts)
    base = catalog.stored("sentiment")
    catalog.change(base, base.spec, "first", None)
    with pytest.raises(ConcurrentChange):
        catalog.change(base, base.spec, "second", None)
    assert catalog.stored("sentiment").reason == "first"


def test_a_pin_lasts_until_the_next_stored_version(parts: tuple) -> None:  # type: ignore[type-arg]
    catalog = open_catalog(parts)
    task = catalog["sentiment"]
    catalog["sentiment"] = dataclasses.replace(task, batch_size=7)
    assert catalog.get("sentiment").batch_size == 7  # type: ignore[union-attr]
    catalog.change(catalog.stored("sentiment"), catalog.stored("sentiment").spec, "x", None)
    assert catalog.get("sentiment").batch_size == 32  # type: ignore[union-attr]


def test_carry_over_adds_only_blob_backed_sets() -> None:
    files = {"rounds": [{"name": "r1", "datasets": [{"name": "test", "path": "a.jsonl"}]}]}
    stored = {
        "rounds": [
            {"name": "r1", "datasets": [{"name": "test", "path": "old.jsonl"},
                                        {"name": "extra", "path": "blob:datasets/e.jsonl"}]},
            {"name": "r2", "weight": 2.0, "datasets": [{"name": "t", "path": "blob:datasets/f.jsonl"}]},
            {"name": "gone", "datasets": [{"name": "t", "path": "gone.jsonl"}]},
        ]
    }  # fmt: skip
    merged = carry_over(files, stored)
    assert json.dumps(merged["rounds"]) == json.dumps([
        {"name": "r1", "datasets": [{"name": "test", "path": "a.jsonl"},
                                    {"name": "extra", "path": "blob:datasets/e.jsonl"}]},
        {"name": "r2", "weight": 2.0, "datasets": [{"name": "t", "path": "blob:datasets/f.jsonl"}]},
    ])  # fmt: skip


def test_versions_and_dataset_rows_on_every_backend(database_url: str, tmp_path: Path) -> None:
    db = Database(database_url)
    parts = (db, LocalBlobStore(tmp_path / "blobs"), small_config(tmp_path / "c"), ManualClock())
    catalog = open_catalog(parts)
    base = catalog.stored("sentiment")
    parts[1].put_bytes("datasets/d.jsonl", (parts[2] / "datasets/s/r1.jsonl").read_bytes())
    spec = copy.deepcopy(base.spec)
    spec["rounds"][0]["datasets"].append({"name": "more", "path": "blob:datasets/d.jsonl"})
    new = NewDataset("r1", "more", "d" * 64, "datasets/d.jsonl", 20)
    _, added = catalog.change(base, spec, "more", new)
    assert added is not None and (added.version, added.task_version) == (1, 2)
    with pytest.raises(ConcurrentChange):  # the loser of a race writes nothing
        catalog.change(base, spec, "again", new)
    assert [d.version for d in catalog.versions.datasets("sentiment")] == [1]
    assert catalog.versions.blob_in_use("datasets/d.jsonl")
    db.dispose()


def test_a_blob_backed_round_is_read_through_s3(s3: object, tmp_path: Path) -> None:
    from evaluator.inputs.datasets import load_examples
    from store.s3 import S3BlobStore

    def bucket(cache: str) -> S3BlobStore:
        return S3BlobStore(s3.bucket, "catalog/", cache_dir=tmp_path / cache, client=s3.client())  # type: ignore[attr-defined]

    db = Database(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    config_dir = small_config(tmp_path / "configs")
    writer = TaskCatalog.open(db, bucket("a"), config_dir=config_dir)
    writer.blobs.put_bytes("datasets/s3.jsonl", (config_dir / "datasets/s/r1.jsonl").read_bytes())
    base = writer.stored("sentiment")
    spec = copy.deepcopy(base.spec)
    spec["rounds"].append(
        {"name": "r2", "datasets": [{"name": "t", "path": "blob:datasets/s3.jsonl"}]}
    )
    writer.change(base, spec, "s3", None)
    reader = TaskCatalog.open(db, bucket("b"), config_dir=config_dir)  # another machine's cache
    task = reader["sentiment"]
    examples = load_examples(task, task.round("r2").datasets[0], config_dir)
    assert len(examples) == 20 and str(tmp_path / "b") in task.round("r2").datasets[0].path
    db.dispose()


def test_a_store_outage_at_lookup_uses_the_spec_read_before(
    parts: tuple,  # type: ignore[type-arg]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A job claimed as the database goes down must run on the spec this worker read
    (its result is held through the outage), not fail on the lookup and run twice (a chaos
    run found that)."""
    from sqlalchemy.exc import OperationalError

    catalog = open_catalog(parts)
    known = catalog.get("sentiment")
    assert known is not None

    def down(*_: object) -> None:
        raise OperationalError("SELECT max(version)", {}, Exception("connection refused"))

    monkeypatch.setattr(catalog.versions, "latest_version", down)
    assert catalog.get("sentiment") is known
    with pytest.raises(OperationalError):
        catalog.get("a_task_never_read")
