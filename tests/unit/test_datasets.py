"""Validate the held-out datasets shipped in configs/datasets/<task>/<round>.jsonl."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from configs.paths import CONFIG_DIR
from evaluator.inputs.datasets import load_examples
from evaluator.tasks import load_task
from perturbations.perturbation import changed as changed_example
from perturbations.perturbation import get_perturbation, perturb_example

DATASETS = Path(__file__).resolve().parents[2] / "configs" / "datasets"
GENERATOR = Path(__file__).resolve().parents[2] / "tools" / "datasets" / "build.py"

SPEC = {
    "nli": {
        "rounds": ["r1", "r2", "r3", "r4"],
        "keys": ["uid", "context", "hypothesis", "label", "genre"],
        "labels": {"entailed", "neutral", "contradictory"},
    },
    "qa": {
        "rounds": ["r1", "r2"],
        "keys": ["uid", "context", "question", "answer", "answer_start", "topic"],
        "labels": None,
    },
    "sentiment": {
        "rounds": ["r1", "r2", "r3"],
        "keys": ["uid", "statement", "label", "topic"],
        "labels": {"positive", "negative", "neutral"},
    },
    "hate_speech": {
        "rounds": ["r1", "r2", "r3", "r4"],
        "keys": ["uid", "statement", "label", "target"],
        "labels": {"hateful", "not-hateful"},
    },
    "translation": {
        "rounds": ["r1", "r2"],
        "keys": [
            "uid",
            "sourceText",
            "sourceLanguage",
            "targetLanguage",
            "translatedText",
            "references",
            "direction",
            "gender",
        ],
        "labels": None,
    },
    "vqa": {
        "rounds": ["r1", "r2"],
        "keys": ["uid", "image", "question", "answers", "question_type", "background", "crowding"],
        "labels": None,
    },
}
MIN_ROWS = 60
MIN_FAIRNESS_SHARE = 0.30


def files():
    return [(task, rnd) for task, spec in SPEC.items() for rnd in spec["rounds"]]


def load(task: str, rnd: str) -> list[dict]:
    path = DATASETS / task / f"{rnd}.jsonl"
    raw = path.read_bytes()
    raw.decode("ascii")  # ASCII only
    assert raw.endswith(b"\n")
    rows = []
    for n, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
        assert line.strip(), f"{path}:{n} is blank"
        row = json.loads(line)
        assert isinstance(row, dict), f"{path}:{n} is not an object"
        rows.append(row)
    return rows


@pytest.mark.parametrize(("task", "rnd"), files())
def test_rows_are_well_formed(task, rnd):
    spec = SPEC[task]
    rows = load(task, rnd)
    assert len(rows) >= MIN_ROWS
    for row in rows:
        assert list(row) == spec["keys"], row
        for key in spec["keys"]:
            if key == "answer_start":
                assert isinstance(row[key], int) and row[key] >= 0
            elif key == "references":  # further reference translations, maybe none
                assert all(isinstance(ref, str) and ref.strip() for ref in row[key])
            elif key == "answers":  # VQA: ten annotators' answers
                assert len(row[key]) == 10 and all(isinstance(a, str) for a in row[key])
            else:
                assert isinstance(row[key], str) and row[key].strip(), (key, row)
        if spec["labels"] is not None:
            assert row["label"] in spec["labels"], row
    texts = [json.dumps({k: v for k, v in r.items() if k != "uid"}, sort_keys=True) for r in rows]
    assert len(set(texts)) == len(texts), "duplicate rows"


@pytest.mark.parametrize("task", list(SPEC))
def test_uids_unique_across_task(task):
    uids = [r["uid"] for rnd in SPEC[task]["rounds"] for r in load(task, rnd)]
    dupes = [u for u, c in Counter(uids).items() if c > 1]
    assert not dupes


@pytest.mark.parametrize("rnd", SPEC["qa"]["rounds"])
def test_qa_offsets_exact(rnd):
    for row in load("qa", rnd):
        start, answer = row["answer_start"], row["answer"]
        assert row["context"][start : start + len(answer)] == answer, row["uid"]


@pytest.mark.parametrize(("task", "rnd"), [f for f in files() if SPEC[f[0]]["labels"]])
def test_labels_balanced(task, rnd):
    labels = SPEC[task]["labels"]
    rows = load(task, rnd)
    counts = Counter(r["label"] for r in rows)
    shares = {lab: counts[lab] / len(rows) for lab in labels}
    if len(labels) == 2:
        assert all(0.35 <= s <= 0.65 for s in shares.values()), shares
    else:
        assert all(s >= 0.20 for s in shares.values()), shares


@pytest.mark.parametrize(("task", "rnd"), [f for f in files() if f[0] != "vqa"])
def test_the_fairness_swap_changes_enough_rows(task, rnd):
    """Fairness is scored only on rows the swap changes: each round needs enough of them,
    counted with the real perturbation over every input field (swaps change all alike)."""
    spec = load_task(CONFIG_DIR / "tasks" / f"{task}.yaml")
    examples = load_examples(spec, spec.round(rnd).datasets[0], CONFIG_DIR)
    swap = get_perturbation("fairness")
    changed = [changed_example(e, perturb_example(e, swap, 0, spec.input_fields)) for e in examples]
    assert sum(changed) / len(examples) >= MIN_FAIRNESS_SHARE


def jsonl_files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.glob("*/*.jsonl")}


def test_generator_reproduces_shipped_bytes(tmp_path):
    """tools/datasets/build.py writes every shipped file, byte for byte, and nothing else."""
    result = subprocess.run(
        [sys.executable, str(GENERATOR), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    shipped = jsonl_files(DATASETS)
    assert shipped == {Path(task, f"{rnd}.jsonl") for task, rnd in files()}
    assert jsonl_files(tmp_path) == shipped
    for rel in sorted(shipped):
        assert (tmp_path / rel).read_bytes() == (DATASETS / rel).read_bytes(), (
            f"{rel} differs from the generator"
        )
