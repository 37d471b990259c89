"""The shipped visual-question-answering task: its data, its example models run for real as
processes, and the keys the SDK gives for it."""

from __future__ import annotations

import base64
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from configs.paths import CONFIG_DIR
from configs.vocabulary.images import check_image
from evaluator.inputs.datasets import load_examples
from evaluator.tasks import load_tasks

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"


@pytest.mark.parametrize("rnd", ["r1", "r2"])
def test_each_round_holds_drawn_scenes_with_three_to_ten_answers(rnd: str) -> None:
    task = load_tasks()["vqa"]
    examples = load_examples(task, task.round(rnd).datasets[0], CONFIG_DIR)
    assert len(examples) >= 80
    for example in examples:
        image = check_image(example.inputs["image"], task.limits.max_input_image_bytes)
        assert (image.format, image.width, image.height) == ("PNG", 128, 128)
        assert 3 <= len(example.references) + 1 <= 10
    for column in task.slices:
        sizes = Counter(e.slices[column] for e in examples)
        assert len(sizes) >= 2 and min(sizes.values()) >= task.min_slice_size, (column, sizes)


def test_round_two_asks_what_round_one_does_not() -> None:
    folder = CONFIG_DIR / "datasets" / "vqa"
    rows = {
        rnd: [json.loads(line) for line in (folder / f"{rnd}.jsonl").read_text().splitlines()]
        for rnd in ("r1", "r2")
    }
    harder = ("nearest", "not ", "more ", "above ")
    assert not any(any(h in r["question"] for h in harder) for r in rows["r1"])
    assert sum(any(h in r["question"] for h in harder) for r in rows["r2"]) >= 15
    assert all(base64.b64decode(r["image"])[:4] == b"\x89PNG" for r in rows["r2"])


@pytest.mark.slow
def test_the_model_that_reads_the_image_beats_the_prior_on_every_round(tmp_path: Path) -> None:
    from client.sdk import dynabench_round_keys
    from evaluator.pipeline import run_evaluation
    from evaluator.runtimes.process import ProcessRuntime
    from store.blobs import LocalBlobStore
    from tests.unit.test_dynalab_single import quick_profile

    task = quick_profile(load_tasks()["vqa"])  # it compares scores, not speeds
    blobs = LocalBlobStore(tmp_path / "blobs")
    results = {
        name: run_evaluation(
            task, ProcessRuntime([sys.executable, str(MODELS / name / "model.py")]), blobs
        )
        for name in ("vqa_prior", "vqa_shapes")
    }
    assert {n: r.failure for n, r in results.items()} == dict.fromkeys(results)
    rounds = {n: {row["round"]: row for row in r.rounds} for n, r in results.items()}
    for rnd in ("r1", "r2"):
        assert rounds["vqa_prior"][rnd]["performance"] < rounds["vqa_shapes"][rnd]["performance"]
    shapes = rounds["vqa_shapes"]
    assert shapes["r1"]["performance"] > shapes["r2"]["performance"]  # round 2 is harder
    assert set(shapes["r1"]["variants"]) == {p.name for p in task.robustness}
    # the prior never looks at the picture: image perturbations cannot move it
    prior_variants = rounds["vqa_prior"]["r1"]["variants"]
    assert all(prior_variants[p] == 100.0 for p in prior_variants if p.startswith("image-"))
    summary = results["vqa_shapes"].summary
    low, high = summary["performance_ci"]
    assert low <= summary["performance"] <= high and summary["metric"] == "vqa_accuracy"
    sliced = {s.key.slice.split("=")[0] for s in results["vqa_shapes"].scores if s.key.slice}
    assert sliced == {"background", "crowding", "question_type"}
    payload = {
        "metric": "vqa_accuracy",
        "rounds": results["vqa_shapes"].rounds,
        "scores": [s.to_dict() for s in results["vqa_shapes"].scores],
    }
    keys = dynabench_round_keys(payload)
    assert keys["round1_vqa_accuracy"] == shapes["r1"]["performance"]
    assert keys["round2_vqa_accuracy"] == shapes["r2"]["performance"]
