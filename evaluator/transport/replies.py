"""Checks on what a model answered: count, order, echoed wire ids, output key, label set.

Every problem raises EvaluationError with its FailureCode; what passes becomes Predictions
carrying the examples' dataset uids (never the wire ids).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from configs.schema import TaskSpec
from configs.vocabulary.examples import Example, Prediction
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError


def validate_predictions(
    task: TaskSpec,
    examples: Sequence[Example],
    items: list[Any],
    wire_ids: Sequence[str] | None = None,
    *,
    fold_case: bool = False,
) -> list[Prediction]:
    """Check count, order, echoed wire ids (None: matched by position) and label set;
    return Predictions carrying the examples' dataset uids. ``fold_case`` accepts a label
    that differs from one of the task's only in letter case (see ``label_folding``)."""
    if len(items) != len(examples):
        raise EvaluationError(
            FailureCode.WRONG_COUNT, f"sent {len(examples)} instances, got {len(items)} predictions"
        )
    folding = label_folding(task.labels) if fold_case else {}
    predictions = []
    for position, (example, item) in enumerate(zip(examples, items, strict=True)):
        if not isinstance(item, dict):
            raise EvaluationError(
                FailureCode.BAD_PREDICTION, f"prediction {position} is not an object"
            )
        if wire_ids is not None and item.get("uid") != wire_ids[position]:
            _raise_uid_mismatch(wire_ids, items, position)
        predictions.append(validate_one(task, position, example, item, folding))
    return predictions


def validate_one(
    task: TaskSpec, position: int, example: Example, item: Any, folding: Mapping[str, str]
) -> Prediction:
    """One answer (``position`` names it in messages); ``folding`` maps case-folded labels
    to the task's own (empty: labels must match exactly)."""
    if not isinstance(item, dict):
        raise EvaluationError(FailureCode.BAD_PREDICTION, f"prediction {position} is not an object")
    key = task.output_key
    output = item.get(key)
    if not isinstance(output, str):
        raise EvaluationError(
            FailureCode.BAD_PREDICTION, f"prediction {position} has no string {key!r}"
        )
    labels = task.labels
    if labels and output not in labels:
        output = folding.get(output.casefold(), output)
        if output not in labels:
            raise EvaluationError(
                FailureCode.LABEL_OUTSIDE_SET,
                f"prediction {position} label {output[:50]!r} is not one of {sorted(labels)}",
            )
    probs = _probs(item.get("probs", item.get("prob")))
    return Prediction(example.uid, output, probs)


def label_folding(labels: Collection[str]) -> dict[str, str]:
    """Case-folded label -> the task's label, for the labels no other label folds to: a
    reply of "Entailed" means "entailed", but where a task had both "yes" and "YES" a
    reply of "Yes" would be a guess, so it stays outside the set."""
    seen: dict[str, list[str]] = {}
    for label in labels:
        seen.setdefault(label.casefold(), []).append(label)
    return {folded: same[0] for folded, same in seen.items() if len(same) == 1}


def _probs(value: Any) -> dict[str, float] | None:
    """Optional, unscored probabilities: kept only as a flat {label: number} object."""
    if not isinstance(value, Mapping):
        return None
    for key, number in value.items():
        if not isinstance(key, str) or isinstance(number, bool):
            return None
        if not isinstance(number, int | float):
            return None
    return dict(value)


def _raise_uid_mismatch(sent: Sequence[str], items: list[Any], position: int) -> None:
    got = [item.get("uid") if isinstance(item, dict) else None for item in items]
    uids = [uid for uid in got if isinstance(uid, str)]
    if len(uids) == len(got) and sorted(uids) == sorted(sent):
        raise EvaluationError(
            FailureCode.WRONG_ORDER, f"predictions are not in the order sent (position {position})"
        )
    raise EvaluationError(
        FailureCode.BAD_PREDICTION,
        f"prediction {position} has uid {got[position]!r}, expected {sent[position]!r}",
    )
