"""Task configs: the shipped ones load; every kind of mistake names its file and field."""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from configs.paths import CONFIG_DIR
from configs.schema import ConfigError
from evaluator.inputs.datasets import load_examples
from evaluator.tasks import load_task, load_tasks
from tests.conftest import FIXTURES, make_config_dir

ROUNDS = {"nli": 4, "qa": 2, "sentiment": 3, "hate_speech": 4, "translation": 2, "vqa": 2}
DEFAULT_WEIGHTS = {"performance": 4, "throughput": 1, "memory": 1, "robustness": 1, "fairness": 1}
FIELDS = {
    "nli": ("context", "hypothesis"),
    "qa": ("context", "question"),
    "sentiment": ("statement",),
    "hate_speech": ("statement",),
    "translation": ("sourceText", "sourceLanguage", "targetLanguage"),
    "vqa": ("image", "question"),
}
# VQA's questions name no people: no term swap applies, so its fairness axis weighs nothing
OWN_WEIGHTS = {"vqa": {**DEFAULT_WEIGHTS, "fairness": 0}}


# -- the shipped configs --------------------------------------------------------------------
def test_every_shipped_task_loads_with_its_rounds_and_default_weights() -> None:
    tasks = load_tasks()
    assert {name: len(task.rounds) for name, task in tasks.items()} == ROUNDS
    for name, task in tasks.items():
        assert dict(task.weights) == OWN_WEIGHTS.get(name, DEFAULT_WEIGHTS)
        assert task.input_fields == FIELDS[name]
        assert task.source.endswith(f"{name}.yaml")
        for round_spec in task.rounds:
            for dataset in round_spec.datasets:
                assert load_examples(task, dataset, CONFIG_DIR)


def test_shipped_output_types_and_labels() -> None:
    tasks = load_tasks()
    assert tasks["qa"].output_type == "answer" and tasks["qa"].output_key == "answer"
    assert tasks["qa"].labels == ()
    assert tasks["nli"].labels == ("entailed", "neutral", "contradictory")
    assert tasks["hate_speech"].labels == ("hateful", "not-hateful")
    assert tasks["nli"].perturb_fields == ("hypothesis",)
    assert tasks["sentiment"].perturb_fields == ("statement",)


# -- a temp config dir with one task --------------------------------------------------------
def base_task() -> dict[str, Any]:
    """The toy fixture task as a mapping, to be broken one field at a time."""
    return yaml.safe_load((FIXTURES / "configs" / "tasks" / "toy.yaml").read_text())


def write_task(config_dir: Path, raw: dict[str, Any] | str, name: str = "toy") -> Path:
    path = config_dir / "tasks" / f"{name}.yaml"
    path.write_text(raw if isinstance(raw, str) else yaml.safe_dump(raw), encoding="utf-8")
    return path


def load_error(config_dir: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_tasks(config_dir / "tasks")
    return info.value


def edit(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    raw = copy.deepcopy(base_task())
    change(raw)
    return raw


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(raw: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = raw
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        node[int(last) if isinstance(node, list) else last] = value

    return change


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda raw: raw.pop(key)


BROKEN = [
    ("unknown top-level key", _set("colour", "blue"), "colour"),
    ("missing required key", _drop("metric"), "metric"),
    ("missing rounds", _drop("rounds"), "rounds"),
    ("bad name", _set("name", "Toy-Task"), "name"),
    ("unknown metric", _set("metric", "acuracy"), "metric"),
    ("metric not fitting a label output", _set("metric", "squad_f1"), "metric"),
    ("metric not fitting an answer output", _set("output", {"type": "answer"}), "metric"),
    ("one label", _set("output.labels", ["yes"]), "output.labels"),
    ("duplicate labels", _set("output.labels", ["yes", "no", "yes"]), "output.labels"),
    (
        "unquoted yes/no labels are YAML booleans",
        _set("output.labels", [True, False]),
        "output.labels[0]",
    ),
    ("unknown output type", _set("output.type", "score"), "output.type"),
    ("the gold as an input", _set("input_fields", ["premise", "claim", "label"]), "input_fields"),
    ("the uid as an input", _set("input_fields", ["uid", "claim"]), "input_fields"),
    ("a description that is not text", _set("description", ["a"]), "description"),
    ("duplicate round names", _set("rounds.1.name", "alpha"), "rounds"),
    ("round name with a slash", _set("rounds.1.name", "r1/2"), "rounds[1].name"),
    ("round name that is not a string", _set("rounds.1.name", 12), "rounds[1].name"),
    ("round weight zero", _set("rounds.0.weight", 0), "rounds[0].weight"),
    (
        "dataset path missing",
        _set("rounds.0.datasets.0.path", "datasets/toy/nope.jsonl"),
        "rounds[0].datasets[0].path",
    ),
    ("perturb_fields not a subset", _set("perturb_fields", ["claim", "label"]), "perturb_fields"),
    (
        "unknown perturbation",
        _set("perturbations.robustness", [{"name": "typoo"}]),
        "perturbations.robustness[0].name",
    ),
    (
        "perturbation without a name",
        _set("perturbations.robustness", [{"seed": 1}]),
        "perturbations.robustness[0].name",
    ),
    ("unknown perturbation axis", _set("perturbations.speed", []), "perturbations.speed"),
    ("unknown weight axis", _set("weights.speed", 1), "weights.speed"),
    ("negative weight", _set("weights.memory", -1), "weights.memory"),
    ("all-zero weights", _set("weights", dict.fromkeys(DEFAULT_WEIGHTS, 0)), "weights"),
    ("unknown limits key", _set("limits.gpus", 1), "limits.gpus"),
    ("wrong type in limits", _set("limits.startup_s", "ten"), "limits.startup_s"),
    ("float for an integer limit", _set("limits.pids", 2.5), "limits.pids"),
    ("boolean limit", _set("limits.memory_gib", True), "limits.memory_gib"),
    ("negative integer for a float limit", _set("limits.request_s", -1), "limits.request_s"),
    ("zero time budget", _set("limits.total_s", 0), "limits.total_s"),
    (
        "zero sampling interval",
        _set("profiling.sample_interval_s", 0),
        "profiling.sample_interval_s",
    ),
    ("batch size zero", _set("batch_size", 0), "batch_size"),
    ("NaN weight", _set("weights.performance", float("nan")), "weights.performance"),
    ("infinite weight", _set("weights.memory", float("inf")), "weights.memory"),
    ("NaN instance memory", _set("instance_memory_gib", float("nan")), "instance_memory_gib"),
    ("NaN round weight", _set("rounds.0.weight", float("nan")), "rounds[0].weight"),
    ("NaN time budget", _set("limits.request_s", float("nan")), "limits.request_s"),
    ("infinite memory limit", _set("limits.memory_gib", float("inf")), "limits.memory_gib"),
    ("version as a string", _set("version", "1"), "version"),
]


@pytest.mark.parametrize(("change", "field"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_a_broken_task_names_its_file_and_field(
    config_dir: Path, change: Callable[[dict[str, Any]], None], field: str
) -> None:
    path = write_task(config_dir, edit(change))
    error = load_error(config_dir)
    assert error.source == str(path)
    assert error.field == field
    assert str(path) in str(error) and field in str(error)


def test_bad_yaml_names_the_file(config_dir: Path) -> None:
    path = write_task(config_dir, "name: toy\nrounds: [unclosed\n")
    error = load_error(config_dir)
    assert error.source == str(path)
    assert "YAML" in error.problem


def test_top_level_must_be_a_mapping(config_dir: Path) -> None:
    path = write_task(config_dir, "- just\n- a list\n")
    assert load_error(config_dir).source == str(path)


def test_file_name_must_match_the_task_name(config_dir: Path) -> None:
    (config_dir / "tasks" / "toy.yaml").rename(config_dir / "tasks" / "other.yaml")
    error = load_error(config_dir)
    assert error.source.endswith("other.yaml") and error.field == "name"


def test_duplicate_task_names_are_rejected(config_dir: Path) -> None:
    shutil.copy(config_dir / "tasks" / "toy.yaml", config_dir / "tasks" / "toy.yml")
    error = load_error(config_dir)
    assert error.field == "name" and "duplicate" in error.problem


def test_a_yml_task_file_is_loaded_not_skipped(config_dir: Path) -> None:
    (config_dir / "tasks" / "toy.yaml").rename(config_dir / "tasks" / "toy.yml")
    assert list(load_tasks(config_dir / "tasks")) == ["toy"]


def test_a_task_inherits_defaults_and_overrides_one_limit(toy_task: Any) -> None:
    assert toy_task.limits.startup_s == 10 and toy_task.limits.request_s == 5
    assert toy_task.limits.max_reply_bytes == 8388608  # from defaults.yaml
    assert dict(toy_task.weights) == DEFAULT_WEIGHTS
    assert [p.name for p in toy_task.robustness] == ["typo"]
    assert [p.name for p in toy_task.fairness] == ["fairness"]
    assert toy_task.labels == ("yes", "no", "maybe")


# -- adding a task or a round is adding files -----------------------------------------------
def test_adding_a_task_is_adding_files(tmp_path: Path) -> None:
    config_dir = make_config_dir(tmp_path / "configs")
    (config_dir / "datasets" / "stance").mkdir()
    rows = [{"uid": f"s{i}", "text": f"text {i}", "label": ["pro", "con"][i % 2]} for i in range(4)]
    (config_dir / "datasets" / "stance" / "first.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in rows)
    )
    raw = {
        "name": "stance",
        "version": 3,
        "input_fields": ["text"],
        "output": {"type": "label", "labels": ["pro", "con"]},
        "metric": "macro_f1",
        "rounds": [
            {"name": "first", "datasets": [{"name": "x", "path": "datasets/stance/first.jsonl"}]}
        ],
    }
    write_task(config_dir, raw, name="stance")
    tasks = load_tasks(config_dir / "tasks")
    assert sorted(tasks) == ["stance", "toy"]
    stance = tasks["stance"]
    assert stance.version == 3 and stance.rounds[0].name == "first"
    assert stance.batch_size == 32 and dict(stance.weights) == DEFAULT_WEIGHTS
    examples = load_examples(stance, stance.rounds[0].datasets[0], config_dir)
    assert [e.uid for e in examples] == ["s0", "s1", "s2", "s3"]


@pytest.mark.parametrize("round_name", ["r112", "round-1.5", "R3_final", "2024.06"])
def test_adding_a_round_keeps_its_name_opaque(config_dir: Path, round_name: str) -> None:
    shutil.copy(
        config_dir / "datasets" / "toy" / "alpha.jsonl", config_dir / "datasets" / "toy" / "x.jsonl"
    )
    raw = base_task()
    raw["rounds"].append(
        {"name": round_name, "datasets": [{"name": "test", "path": "datasets/toy/x.jsonl"}]}
    )
    write_task(config_dir, raw)
    task = load_tasks(config_dir / "tasks")["toy"]
    assert [r.name for r in task.rounds] == ["alpha", "r12", round_name]
    assert task.round(round_name).name == round_name
    assert isinstance(task.round(round_name).name, str)


def test_load_task_reads_one_file_with_the_defaults_beside_it(config_dir: Path) -> None:
    task = load_task(config_dir / "tasks" / "toy.yaml")
    assert task.name == "toy" and task.limits.cpus == 1.0
    assert [r.weight for r in task.rounds] == [1.0, 3.0]


def test_public_dict_shows_fields_labels_rounds_and_limits(toy_task: Any) -> None:
    public = toy_task.public_dict()
    assert public["input_fields"] == ["premise", "claim"]
    assert public["output"] == {
        "type": "label",
        "key": "label",
        "labels": ["yes", "no", "maybe"],
        "fooled_threshold": None,
    }
    assert public["image_fields"] == []
    assert [r["name"] for r in public["rounds"]] == ["alpha", "r12"]
    assert public["limits"]["startup_s"] == 10
    json.dumps(public)  # JSON-ready


@pytest.mark.parametrize(("value", "ok"), [(True, True), (False, True), ("yes", False), (1, False)])
def test_publish_results_is_a_plain_flag(config_dir: Path, value: Any, ok: bool) -> None:
    write_task(config_dir, edit(_set("publish_results", value)))
    if ok:
        assert load_tasks(config_dir / "tasks")["toy"].publish_results is value
    else:
        assert load_error(config_dir).field == "publish_results"
