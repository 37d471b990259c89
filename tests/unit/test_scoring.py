"""scoring and rollup with numbers worked out by hand: weights respected, never a silent 0."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from configs.schema import TaskSpec
from configs.vocabulary.examples import Example, Prediction
from configs.vocabulary.results import ORIGINAL, Score, ScoreKey, pooled_variant
from evaluator.scoring import variants as scoring
from evaluator.scoring.rollup import summarise
from evaluator.tasks import load_tasks

AGREEMENT = scoring.AGREEMENT


def example(uid: str, target: str, group: str = "north", claim: str = "c") -> Example:
    return Example(uid, {"premise": "p", "claim": claim}, target, {"group": group})


def predictions(*outputs: str, uids: list[str] | None = None) -> list[Prediction]:
    uids = uids or [f"u{i}" for i in range(len(outputs))]
    return [Prediction(uid, output) for uid, output in zip(uids, outputs, strict=True)]


BASE = ScoreKey("toy", "r12", "test", "ab" * 32)
FOUR = [
    example("u0", "yes", "north"),
    example("u1", "no", "north"),
    example("u2", "no", "south"),
    example("u3", "maybe", "south"),
]


# -- scoring --------------------------------------------------------------------------------
def test_performance_is_the_metric_with_its_key_and_interval(toy_task: TaskSpec) -> None:
    score = scoring.performance_score(
        toy_task, BASE, FOUR, predictions("yes", "yes", "no", "maybe")
    )
    assert score.value == pytest.approx(75.0) and score.n == 4
    assert score.key == replace(BASE, metric="accuracy")
    assert score.ci_low is not None and score.ci_high is not None
    assert score.ci_low <= 75.0 <= score.ci_high


def test_performance_replicates_are_seeded(toy_task: TaskSpec) -> None:
    preds = predictions("yes", "yes", "no", "maybe")
    one = scoring.performance_with_replicates(toy_task, BASE, FOUR, preds)
    two = scoring.performance_with_replicates(toy_task, BASE, FOUR, preds)
    assert one[0] == two[0]
    assert np.array_equal(one[1], two[1]) and len(one[1]) == toy_task.bootstrap.n_resamples


def run(
    name: str, uids: list[str], outputs: list[str], axis: str = "robustness"
) -> scoring.VariantRun:
    examples = tuple(example(uid, "yes") for uid in uids)
    return scoring.VariantRun(
        axis, name, "1", 7, 5, examples, tuple(predictions(*outputs, uids=uids))
    )


ORIGINALS = {p.uid: p for p in predictions("yes", "no", "no", "yes", "no")}


def test_agreement_counts_only_the_changed_examples(toy_task: TaskSpec) -> None:
    typo = run("typo", ["u1", "u3"], ["no", "no"])  # u1 keeps "no", u3 flips yes -> no
    agreement, performance = scoring.variant_scores(toy_task, BASE, ORIGINALS, typo)
    assert agreement.key == replace(
        BASE, variant="typo", variant_version="1", seed=7, metric=AGREEMENT
    )
    assert agreement.value == pytest.approx(50.0) and agreement.n == 2
    assert performance.key.metric == "accuracy" and performance.key.variant == "typo"
    assert performance.value == pytest.approx(0.0) and performance.n == 2  # gold is "yes"


def test_no_changed_examples_is_none_never_zero(toy_task: TaskSpec) -> None:
    empty = run("paraphrase", [], [])
    (agreement,) = scoring.variant_scores(toy_task, BASE, ORIGINALS, empty)
    assert agreement.value is None and agreement.n == 0
    assert scoring.pooled_agreement(toy_task, ORIGINALS, [empty]) == (None, 0)
    assert scoring.pooled_agreement(toy_task, ORIGINALS, []) == (None, 0)


def test_pooled_agreement_pools_examples_not_averages(toy_task: TaskSpec) -> None:
    typo = run("typo", ["u1", "u3"], ["no", "no"])  # 1 of 2 agree
    paraphrase = run("paraphrase", ["u0", "u2", "u4"], ["yes", "no", "no"])  # 3 of 3
    value, n = scoring.pooled_agreement(toy_task, ORIGINALS, [typo, paraphrase])
    assert value == pytest.approx(80.0) and n == 5  # 4 of 5; the mean of 50 and 100 is 75


def test_qa_agreement_is_token_f1_with_the_own_answer() -> None:
    qa = load_tasks()["qa"]
    originals = {"q": Prediction("q", "red car")}
    examples = (Example("q", {"context": "c", "question": "q"}, "red car"),)
    variant = scoring.VariantRun(
        "robustness", "typo", "1", 0, 1, examples, (Prediction("q", "red bus"),)
    )
    agreement = scoring.variant_scores(qa, BASE, originals, variant)[0]
    assert agreement.value == pytest.approx(50.0)  # precision 1/2, recall 1/2


def test_qa_reports_exact_match_beside_f1() -> None:
    qa = load_tasks()["qa"]
    examples = [Example("a", {}, "Paris"), Example("b", {}, "in 1867")]
    (exact,) = scoring.secondary_scores(
        qa, BASE, examples, predictions("paris", "1867", uids=["a", "b"])
    )
    assert exact.key.metric == "exact_match" and exact.value == pytest.approx(50.0)


def test_label_tasks_have_no_secondary_scores(toy_task: TaskSpec) -> None:
    assert (
        scoring.secondary_scores(toy_task, BASE, FOUR, predictions("yes", "no", "no", "no")) == []
    )


def test_slice_scores_per_group(toy_task: TaskSpec) -> None:
    scores, reports = scoring.slice_scores(
        toy_task, BASE, FOUR, predictions("yes", "yes", "no", "maybe")
    )
    by_slice = {s.key.slice: s for s in scores}
    assert set(by_slice) == {"group=north", "group=south"}
    assert by_slice["group=north"].value == pytest.approx(50.0)
    assert by_slice["group=south"].value == pytest.approx(100.0)
    assert by_slice["group=north"].n == 2 and by_slice["group=north"].key.metric == "accuracy"
    assert reports[0]["round"] == "r12" and reports[0]["dataset"] == "test"


# -- rollup ---------------------------------------------------------------------------------
def key(round_name: str, **fields: object) -> ScoreKey:
    return ScoreKey("toy", round_name, str(fields.pop("dataset", "test")), "cd" * 32, **fields)  # type: ignore[arg-type]


def perf(round_name: str, value: float, **fields: object) -> Score:
    return Score(key(round_name, metric="accuracy", **fields), value, 10, value - 5, value + 5)


def agree(round_name: str, variant: str, value: float | None, n: int, version: str = "") -> Score:
    return Score(
        key(round_name, variant=variant, variant_version=version, metric=AGREEMENT), value, n
    )


def test_rounds_are_combined_with_their_weights(toy_task: TaskSpec) -> None:
    assert [(r.name, r.weight) for r in toy_task.rounds] == [("alpha", 1.0), ("r12", 3.0)]
    summary, rows = summarise(toy_task, [perf("alpha", 80.0), perf("r12", 40.0)], {})
    assert [row["performance"] for row in rows] == [80.0, 40.0]
    assert summary["performance"] == pytest.approx((80.0 * 1 + 40.0 * 3) / 4)  # 50.0
    assert rows[0]["performance_ci"] == [75.0, 85.0]


def test_a_round_without_changed_examples_is_left_out_not_zero(toy_task: TaskSpec) -> None:
    scores = [
        perf("alpha", 80.0),
        perf("r12", 40.0),
        agree("alpha", pooled_variant("robustness"), 90.0, 10),
        agree("r12", pooled_variant("robustness"), None, 0),
        agree("alpha", pooled_variant("fairness"), None, 0),
        agree("r12", pooled_variant("fairness"), None, 0),
    ]
    summary, rows = summarise(toy_task, scores, {})
    assert rows[1]["robustness"] is None and rows[1]["robustness_n"] == 0
    assert summary["robustness"] == pytest.approx(90.0)  # not (90 * 1 + 0 * 3) / 4 = 22.5
    assert summary["fairness"] is None


def test_nothing_measured_is_none(toy_task: TaskSpec) -> None:
    summary, rows = summarise(toy_task, [], {})
    assert summary["performance"] is None and rows[0]["performance"] is None
    assert summary["throughput"] is None and summary["memory"] is None
    assert summary["performance_ci"] is None


def test_pooled_fairness_is_not_mixed_with_the_fairness_perturbation(toy_task: TaskSpec) -> None:
    """The ``fairness`` perturbation is named like its axis; the pooled score is kept apart."""
    scores = [
        perf("alpha", 80.0),
        agree("alpha", "fairness", 100.0, 4, version="1.1"),
        agree("alpha", "fairness-ethnicity", 50.0, 4, version="1"),
        agree("alpha", pooled_variant("fairness"), 75.0, 8),  # pooled over both
    ]
    _, rows = summarise(toy_task, scores, {})
    assert rows[0]["fairness"] == pytest.approx(75.0)
    assert rows[0]["fairness_n"] == 8
    assert rows[0]["variants"] == {"fairness": 100.0, "fairness-ethnicity": 50.0}


def test_per_round_counts_weigh_pooled_agreement_by_examples(toy_task: TaskSpec) -> None:
    scores = [
        perf("alpha", 80.0),
        agree("alpha", "typo", 100.0, 3, version="1"),
        agree("alpha", "paraphrase", 0.0, 1, version="1"),
        agree("alpha", pooled_variant("robustness"), 75.0, 4),
    ]
    _, rows = summarise(toy_task, scores, {})
    assert rows[0]["robustness"] == pytest.approx(75.0) and rows[0]["robustness_n"] == 4
    assert rows[0]["variants"] == {"paraphrase": 0.0, "typo": 100.0}


def test_datasets_of_a_round_average_and_slices_and_variants_do_not_count(
    toy_task: TaskSpec,
) -> None:
    scores = [
        perf("alpha", 80.0),
        perf("alpha", 60.0, dataset="extra"),
        perf("alpha", 0.0, slice="group=north"),
        perf("alpha", 10.0, variant="typo", variant_version="1"),
        perf("r12", 40.0),
    ]
    summary, rows = summarise(toy_task, scores, {})
    assert rows[0]["performance"] == pytest.approx(70.0)
    assert rows[0]["datasets"] == ["test", "extra"] and rows[0]["n"] == 20
    assert "performance_ci" not in rows[0]
    assert summary["performance"] == pytest.approx((70.0 + 40.0 * 3) / 4)


def test_profile_numbers_pass_through(toy_task: TaskSpec) -> None:
    profile = {
        "throughput": {"examples_per_s": 123.0},
        "memory": {"avg_gib": 0.5, "peak_gib": 0.75},
    }
    summary, _ = summarise(toy_task, [perf("alpha", 80.0)], profile)
    assert (summary["throughput"], summary["memory"], summary["memory_peak"]) == (123.0, 0.5, 0.75)
    assert summary["metric"] == "accuracy"


def test_score_to_dict_is_flat(toy_task: TaskSpec) -> None:
    data = perf("alpha", 80.0).to_dict()
    assert data["variant"] == ORIGINAL and data["round"] == "alpha" and data["value"] == 80.0
    assert data["ci_low"] == 75.0 and data["slice"] == "" and data["seed"] == 0


def test_equal_sized_rounds_are_resampled_independently(toy_task: TaskSpec) -> None:
    """Each set gets its own bootstrap seed, reproducibly (one shared seed would draw the
    same indices for equal-sized rounds and make the overall interval too narrow)."""
    examples = [Example(f"u{i}", {"premise": "p", "claim": "c"}, "yes") for i in range(40)]
    predictions = [Prediction(e.uid, "yes" if i % 3 else "no") for i, e in enumerate(examples)]
    reps = {
        name: scoring.performance_with_replicates(
            toy_task, replace(BASE, round=name), examples, predictions
        )[1]
        for name in ("alpha", "r12")
    }
    assert not np.array_equal(reps["alpha"], reps["r12"])
    again = scoring.performance_with_replicates(
        toy_task, replace(BASE, round="alpha"), examples, predictions
    )[1]
    assert np.array_equal(again, reps["alpha"])


def test_a_round_of_several_datasets_gets_an_interval(toy_task: TaskSpec) -> None:
    first = toy_task.rounds[0]
    extra = replace(first.datasets[0], name="extra")
    two_sets = replace(toy_task, rounds=(replace(first, datasets=(first.datasets[0], extra)),))
    replicates = {
        (first.name, first.datasets[0].name): np.linspace(60, 80, 200),
        (first.name, "extra"): np.linspace(70, 90, 200),
    }
    scores = [perf(first.name, 70.0), perf(first.name, 80.0, dataset="extra")]
    summary, rows = summarise(two_sets, scores, {}, replicates)
    assert rows[0]["performance"] == pytest.approx(75.0)  # datasets weigh equally
    assert rows[0]["performance_ci"] == pytest.approx([65.5, 84.5], abs=0.1)
    assert summary["performance_ci"] == pytest.approx(rows[0]["performance_ci"])
