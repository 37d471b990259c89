"""VQA accuracy against hand-computed cases, its answer normalisation, and the ``vqa`` output
type's gold, agreement and fooled rules."""

from __future__ import annotations

import pytest

from metrics.collection import is_fooled
from metrics.metric import get_metric
from metrics.outputs import BadGold, agreement, get_output_type
from metrics.paired import paired_metric_replicates
from metrics.vqa import normalize_vqa_answer, vqa_accuracy, vqa_accuracy_one


def refs(matching: int, total: int = 10, answer: str = "red") -> list[str]:
    return [answer] * matching + [f"other{i}" for i in range(total - matching)]


@pytest.mark.parametrize(
    ("matching", "expected"),
    [
        (0, 0.0),
        (1, 0.3),  # the one match left out: 0; the nine others: 1/3 each -> 9 * (1/3) / 10
        (2, 0.6),  # 2 * (1/3) + 8 * (2/3) over 10
        (3, 0.9),  # 3 * (2/3) + 7 * 1 over 10
        (4, 1.0),  # every subset of nine still holds three matches
        (10, 1.0),
    ],
)
def test_ten_references_by_hand(matching: int, expected: float) -> None:
    assert vqa_accuracy_one(refs(matching), "red") == pytest.approx(expected)


def test_three_references_cap_at_two_thirds_as_leave_one_out_does() -> None:
    assert vqa_accuracy_one(["dog", "dog", "dog"], "dog") == pytest.approx(2 / 3)
    assert vqa_accuracy_one(["dog", "cat", "cat"], "dog") == pytest.approx((0 + 1 / 3 + 1 / 3) / 3)


@pytest.mark.parametrize(
    ("given", "normalised"),
    [
        ("Two", "2"),
        ("the dog.", "dog"),
        ("Yes!", "yes"),
        ("isnt", "isn't"),
        ("3.5", "3.5"),
        ("1,000", "1000"),
        ("  A   red\tball ", "red ball"),
        ("black-and-white", "black and white"),
    ],
)
def test_answers_are_normalised_like_the_official_evaluation(given: str, normalised: str) -> None:
    assert normalize_vqa_answer(given) == normalised


def test_the_metric_averages_examples_on_the_0_to_100_scale() -> None:
    gold = [refs(3), refs(1), ["two"] * 10]
    pred = ["Red", "red", "2"]
    assert vqa_accuracy(gold, pred) == pytest.approx(100 * (0.9 + 0.3 + 1.0) / 3)
    metric = get_metric("vqa_accuracy")
    assert metric.output_type == "vqa"
    assert metric.score(gold, pred, ()) == pytest.approx(vqa_accuracy(gold, pred))
    interval = metric.interval(gold, pred, (), n_resamples=200, seed=1)
    assert 30 <= interval.low <= metric.score(gold, pred, ()) <= interval.high <= 100
    point_c, point_b, _, _ = paired_metric_replicates(
        "vqa_accuracy", gold, pred, ["blue", "blue", "blue"], (), n_resamples=20
    )
    assert (point_c, point_b) == (pytest.approx(73.333, abs=1e-3), 0.0)
    with pytest.raises(ValueError):
        vqa_accuracy_one(["only one"], "x")


def test_the_vqa_output_type_reads_answers_agrees_and_fools() -> None:
    vqa = get_output_type("vqa")
    gold = vqa.read_gold({"answer": "x", "answers": ["red", "red", "crimson"]}, "answer", ())
    assert vqa.gold_for_scoring(gold) == ("red", "red", "crimson")
    for bad in ({"answers": ["a", "b"]}, {"answers": "red"}, {"answers": ["a", "", "c"]}):
        with pytest.raises(BadGold):
            vqa.read_gold(bad, "answer", ())
    assert agreement("vqa", ["Two", "red"], ["2", "blue"]) == 50.0
    intended = {"answer": "red", "answers": ["red", "red", "crimson"]}
    assert is_fooled("vqa", intended, {"answer": "blue"})
    assert not is_fooled("vqa", intended, {"answer": "Crimson."})
    assert vqa.gold_fields("answer") == ("answers",)  # the key holds no gold: answers do
