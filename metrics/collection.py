"""Whether a model's answer to a writer's example "fools" it (the dynamic loop's verdict).

A model is fooled when it would be scored wrong on the example, by its output type's rule
(``metrics.outputs``): a label differs from the intended one; a QA answer's token F1
against the intended answer is below the QA threshold (0..1); a translation's chrF++
against the writer's references is below the chrF threshold (0..100).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from configs.vocabulary.examples import Prediction
from metrics.outputs import get_output_type
from metrics.outputs.span import DEFAULT_QA_F1_THRESHOLD

__all__ = ["DEFAULT_QA_F1_THRESHOLD", "is_fooled"]


def is_fooled(
    output_type: str,
    intended: Mapping[str, Any],
    predicted: Prediction | Mapping[str, Any],
    threshold: float | None = None,
    key: str | None = None,
) -> bool:
    """True when ``predicted`` misses ``intended`` (gold as the type writes it: under the
    ``key``, further references under "references"; VQA: "answers"); ``predicted`` is a Prediction or a mapping with the same
    key. ``threshold`` defaults to the type's. ValueError on an unknown output type or a
    missing or non-string answer."""
    output = get_output_type(output_type)
    key = key or output.key
    wanted = output.written_references(intended, key)
    given = (
        predicted.output
        if isinstance(predicted, Prediction)
        else _text(predicted, key, "predicted")
    )
    limit = output.fooled_threshold if threshold is None else threshold
    return output.fooled(wanted, given, limit)


def _text(values: Mapping[str, Any], key: str, what: str) -> str:
    value = values.get(key)
    if not isinstance(value, str):
        raise ValueError(f"the {what} answer has no string {key!r}")
    return value
