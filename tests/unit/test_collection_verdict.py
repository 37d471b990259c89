"""``metrics.collection.is_fooled``: hand-computed cases for label and QA tasks."""

from __future__ import annotations

import pytest

from configs.vocabulary.examples import Prediction
from metrics.collection import is_fooled


def test_same_label_does_not_fool() -> None:
    assert not is_fooled("label", {"label": "entailed"}, Prediction("x", "entailed"))


def test_different_label_fools() -> None:
    assert is_fooled("label", {"label": "entailed"}, Prediction("x", "neutral"))
    assert is_fooled("label", {"label": "entailed"}, {"label": "contradictory"})


def test_labels_compare_exactly_as_accuracy_does() -> None:
    # The transport folds a dialect's case into the task's label before a Prediction
    # exists; what reaches the verdict is compared as scoring compares it.
    assert is_fooled("label", {"label": "entailed"}, {"label": "Entailed"})
    assert is_fooled("label", {"label": "entailed"}, {"label": " entailed"})


def test_qa_exact_answer_does_not_fool() -> None:
    intended = {"answer": "in 1867", "answer_start": 30}
    assert not is_fooled("answer", intended, Prediction("x", "In 1867."))


def test_qa_partial_overlap_above_threshold_does_not_fool() -> None:
    # gold "the eiffel tower in paris" -> eiffel tower in paris (4 tokens); pred "eiffel
    # tower" (2): precision 1, recall 1/2, F1 = 2/3 >= 0.4.
    intended = {"answer": "the Eiffel Tower in Paris", "answer_start": 0}
    assert not is_fooled("answer", intended, {"answer": "Eiffel Tower"})


def test_qa_partial_overlap_below_threshold_fools() -> None:
    # gold: eiffel tower in paris (4); pred: paris france europe continent (4): 1 in common,
    # precision 1/4, recall 1/4, F1 = 0.25 < 0.4.
    intended = {"answer": "the Eiffel Tower in Paris", "answer_start": 0}
    assert is_fooled("answer", intended, {"answer": "Paris France Europe continent"})


def test_qa_threshold_is_a_strict_bound() -> None:
    # gold "w x" (2), pred "w y z" (3): P 1/3, R 1/2, F1 = 2*(1/6)/(5/6) = 0.4.
    assert not is_fooled("answer", {"answer": "w x"}, {"answer": "w y z"})
    assert is_fooled("answer", {"answer": "w x"}, {"answer": "w y z"}, threshold=0.41)


def test_qa_empty_answer_fools() -> None:
    assert is_fooled("answer", {"answer": "Warsaw"}, Prediction("x", ""))
    assert is_fooled("answer", {"answer": "Warsaw"}, {"answer": "the"})  # normalises to empty


def test_unknown_output_type_and_missing_answer_are_refused() -> None:
    with pytest.raises(ValueError, match="output type"):
        is_fooled("span", {"label": "a"}, {"label": "a"})
    with pytest.raises(ValueError, match="intended"):
        is_fooled("label", {"answer": "a"}, {"label": "a"})
    with pytest.raises(ValueError, match="predicted"):
        is_fooled("answer", {"answer": "a"}, {"answer": 3})
