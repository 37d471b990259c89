"""Whether a model's answer to a writer's example "fools" it (the dynamic loop's verdict).

A model is fooled when it would be scored wrong on the example:
* label tasks: its label differs from the intended label. Labels are compared exactly, as
  ``accuracy`` compares them; the letter-case folding a protocol dialect allows has already
  mapped the model's label onto the task's own by the time a prediction exists.
* QA tasks (output type ``answer``): the token F1 of its answer against the intended answer,
  after the SQuAD normalisation scoring uses (``metrics.qa``), is below ``qa_f1_threshold``.
  An empty answer against a non-empty intended one has F1 0, so it fools.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from configs.vocabulary.examples import Prediction
from metrics.qa import token_f1

DEFAULT_QA_F1_THRESHOLD = 0.4
_OUTPUT_TYPES = ("label", "answer")  # the output type names the key the answer is under


def is_fooled(
    output_type: str,
    intended: Mapping[str, Any],
    predicted: Prediction | Mapping[str, Any],
    qa_f1_threshold: float = DEFAULT_QA_F1_THRESHOLD,
) -> bool:
    """True when ``predicted`` misses ``intended`` ({"label": L} or {"answer": text, ...});
    ``predicted`` is a Prediction or a mapping with the same key. ValueError on an unknown
    output type or a missing or non-string answer."""
    key = _output_key(output_type)
    wanted = _text(intended, key, "intended")
    given = (
        predicted.output
        if isinstance(predicted, Prediction)
        else _text(predicted, key, "predicted")
    )
    if key == "label":
        return given != wanted
    return token_f1(wanted, given) < qa_f1_threshold


def _output_key(output_type: str) -> str:
    if output_type not in _OUTPUT_TYPES:
        known = ", ".join(_OUTPUT_TYPES)
        raise ValueError(f"output type {output_type!r} is not one of {known}")
    return output_type


def _text(values: Mapping[str, Any], key: str, what: str) -> str:
    value = values.get(key)
    if not isinstance(value, str):
        raise ValueError(f"the {what} answer has no string {key!r}")
    return value
