"""Task metrics, agreement and profiling summaries against hand-computed values."""

import math

import pytest
from sklearn.metrics import f1_score

from metrics.agreement import label_agreement, qa_agreement
from metrics.classification import accuracy, macro_f1
from metrics.metric import get_metric, metric_names
from metrics.outputs import agreement
from metrics.qa import exact_match, normalize_answer, qa_exact_match, qa_f1, token_f1
from metrics.resources import summarize_memory, summarize_throughput


def test_accuracy_counts_equal_labels():
    assert accuracy(["a", "b", "a", "c"], ["a", "a", "a", "c"]) == 75.0


@pytest.mark.parametrize("gold, pred", [([], []), (["a"], ["a", "b"])])
def test_accuracy_refuses_empty_or_mismatched(gold, pred):
    with pytest.raises(ValueError):
        accuracy(gold, pred)


def test_macro_f1_leaves_out_a_label_absent_from_gold_and_predictions():
    gold, pred = ["a", "a", "b", "b"], ["a", "b", "b", "b"]
    # a: tp 1, 2 gold, 1 predicted -> 2/3; b: tp 2, 2 gold, 3 predicted -> 4/5; c absent.
    assert macro_f1(gold, pred, ["a", "b", "c"]) == pytest.approx(100 * (2 / 3 + 4 / 5) / 2)


def test_macro_f1_counts_a_gold_class_never_predicted_as_zero():
    gold, pred = ["a", "b", "c"], ["a", "b", "b"]
    # a: 1; b: tp 1, 1 gold, 2 predicted -> 2/3; c: 0.
    expected = 100 * (1 + 2 / 3 + 0) / 3
    assert macro_f1(gold, pred, ["a", "b", "c"]) == pytest.approx(expected)
    sk = 100 * f1_score(gold, pred, labels=["a", "b", "c"], average="macro", zero_division=0)
    assert expected == pytest.approx(sk)


def test_macro_f1_ignores_predictions_outside_the_label_set_as_a_class():
    gold, pred = ["a", "a", "b"], ["a", "zzz", "b"]
    # a: tp 1, 2 gold, 1 predicted -> 2/3; b: 1; "zzz" is not averaged.
    assert macro_f1(gold, pred, ["a", "b"]) == pytest.approx(100 * (2 / 3 + 1) / 2)


def test_macro_f1_without_any_label_of_the_set_is_an_error():
    with pytest.raises(ValueError, match="no label"):
        macro_f1(["x"], ["y"], ["a", "b"])


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The  Cat!", "cat"),
        ("an apple a day", "apple day"),
        ("Theatre", "theatre"),
        ("U.S.A.", "usa"),
        ("  A, the; AN  ", ""),
        ("Rock 'n' Roll", "rock n roll"),
    ],
)
def test_normalize_answer_follows_squad_v11(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match_and_token_f1():
    assert exact_match("The Eiffel Tower", "eiffel tower.") == 1.0
    assert exact_match("Paris", "London") == 0.0
    # gold [cat, sat], pred [cat, sat, on, mat]: P = 1/2, R = 1 -> F1 = 2/3.
    assert token_f1("the cat sat", "cat sat on the mat") == pytest.approx(2 / 3)
    assert token_f1("Paris", "London") == 0.0
    assert token_f1("the", "a") == 1.0  # both empty after normalisation
    assert token_f1("Paris", "the") == 0.0


def test_qa_aggregates_take_the_best_gold_answer():
    golds = [["Denver Broncos", "Broncos"], "Santa Clara", "1990"]
    preds = ["broncos", "Santa Clara, California", "1991"]
    assert qa_exact_match(golds, preds) == pytest.approx(100 / 3)
    # 1 + F1(santa clara vs santa clara california: P 2/3, R 1 -> 0.8) + 0.
    assert qa_f1(golds, preds) == pytest.approx(100 * 1.8 / 3)


def test_registry_names_and_scores():
    assert metric_names() == (
        "accuracy", "bleu", "chrf", "exact_match", "macro_f1", "spbleu", "squad_f1",
        "vqa_accuracy",
    )  # fmt: skip
    assert get_metric("accuracy").score(["a", "b"], ["a", "a"], ["a", "b"]) == 50.0
    assert get_metric("squad_f1").score(["the cat"], ["cat"], []) == 100.0
    assert get_metric("macro_f1").higher_is_better


def test_unknown_metric_names_a_close_one():
    with pytest.raises(KeyError, match="did you mean 'accuracy'"):
        get_metric("acuracy")


def test_each_metric_knows_the_output_it_scores():
    assert {m: get_metric(m).output_type for m in metric_names()} == {
        "accuracy": "label",
        "macro_f1": "label",
        "squad_f1": "answer",
        "exact_match": "answer",
        "bleu": "translation",
        "chrf": "translation",
        "spbleu": "translation",
        "vqa_accuracy": "vqa",
    }


def test_label_and_answer_agreement():
    assert label_agreement(["pos", "neg", "neu", "pos"], ["pos", "pos", "neu", "pos"]) == 75.0
    # F1 1 and F1(new york city vs new york: P 1, R 2/3 -> 0.8).
    assert qa_agreement(["Paris", "New York City"], ["paris.", "New York"]) == pytest.approx(90)


def test_agreement_is_none_when_there_is_nothing_to_compare():
    assert agreement("label", [], []) is None
    assert agreement("answer", ["x y"], ["x"]) == pytest.approx(100 * 2 / 3)
    with pytest.raises(ValueError, match="unknown output type 'span'"):
        agreement("span", ["a"], ["a"])  # type: ignore[arg-type]


def test_summarize_throughput():
    summary = summarize_throughput([0.5, 1.0, 0.5], [10, 20, 10])
    assert summary.examples_per_s == 20.0
    # latencies [500, 500, 1000] ms, linear interpolation.
    assert summary.latency_ms_p50 == pytest.approx(500.0)
    assert summary.latency_ms_p90 == pytest.approx(900.0)
    assert summary.latency_ms_p99 == pytest.approx(990.0)
    assert summary.to_dict()["examples"] == 40
    assert summary.batches == 3


@pytest.mark.parametrize(
    "seconds, sizes", [([], []), ([1.0], [1, 2]), ([0.0], [1]), ([1.0], [0]), ([math.nan], [1])]
)
def test_summarize_throughput_refuses_bad_input(seconds, sizes):
    with pytest.raises(ValueError):
        summarize_throughput(seconds, sizes)


def test_summarize_memory_in_gib():
    gib = 1024**3
    summary = summarize_memory([gib, 3 * gib])
    assert (summary.avg_gib, summary.peak_gib, summary.samples) == (2.0, 3.0, 2)
    assert summary.to_dict() == {"avg_gib": 2.0, "peak_gib": 3.0, "samples": 2}
    with pytest.raises(ValueError):
        summarize_memory([])
    with pytest.raises(ValueError):
        summarize_memory([-1])
