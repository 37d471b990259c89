"""Classification metrics on Dynaboard's 0-100 scale.

``macro_f1`` averages per-label F1 over the labels of the task's label set that occur in
the gold labels or the predictions. A label that occurs in neither has no defined F1 and
is left out (counting it as 0 would punish a model for a class the test set lacks); a
label that occurs but is never predicted correctly scores 0. This equals scikit-learn's
``f1_score(gold, pred, labels=<present labels>, average="macro", zero_division=0)``.
Predictions outside the label set count as errors for the gold class but are not
averaged as a class of their own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from metrics._checks import check_pair


def accuracy(gold: Sequence[str], pred: Sequence[str]) -> float:
    """Percentage of predictions equal to the gold label (0..100)."""
    check_pair(gold, pred)
    hits = np.asarray(gold, dtype=object) == np.asarray(pred, dtype=object)
    return 100.0 * float(np.mean(hits))


def per_label_f1(
    gold: Sequence[str], pred: Sequence[str], labels: Sequence[str]
) -> dict[str, float]:
    """F1 (0..1) of every label of ``labels`` that occurs in ``gold`` or ``pred``."""
    check_pair(gold, pred)
    gold_arr = np.asarray(gold, dtype=object)
    pred_arr = np.asarray(pred, dtype=object)
    scores: dict[str, float] = {}
    for label in dict.fromkeys(labels):
        in_gold = gold_arr == label
        in_pred = pred_arr == label
        support = int(in_gold.sum() + in_pred.sum())
        if support == 0:
            continue
        true_pos = int(np.sum(in_gold & in_pred))
        scores[label] = 2.0 * true_pos / support
    return scores


def macro_f1(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str]) -> float:
    """Macro-averaged F1 (0..100) over the labels present in gold or predictions."""
    scores = per_label_f1(gold, pred, labels)
    if not scores:
        raise ValueError("no label of the label set occurs in the gold labels or predictions.")
    return 100.0 * float(np.mean(list(scores.values())))
