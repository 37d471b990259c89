"""Extractive QA (output type ``answer``): the model answers a span of the context; gold is
the answer text and, optionally, its character offset into ``context``.

Fooled: the SQuAD-normalised token F1 of the answer against the intended one is below the
threshold (0..1); an empty answer against a non-empty intended one has F1 0, so it fools.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from metrics.agreement import qa_agreement
from metrics.outputs.base import BadGold, Gold, OutputType, text_field
from metrics.qa import token_f1

DEFAULT_QA_F1_THRESHOLD = 0.4


def _read_gold(row: Mapping[str, Any], key: str, labels: Sequence[str]) -> Gold:
    answer = text_field(row, key)
    start = row.get("answer_start")
    if start is None:
        return Gold(answer)
    context = row.get("context", "")
    if (
        isinstance(start, bool)
        or not isinstance(start, int)
        or not isinstance(context, str)
        or context[start : start + len(answer)] != answer
    ):
        raise BadGold("answer_start does not point at the answer in context")
    return Gold(answer, answer_start=start)


def _fooled(intended: Sequence[str], given: str, threshold: float) -> bool:
    return token_f1(intended[0], given) < threshold


SPAN = OutputType(
    name="answer",
    key="answer",
    reported=("squad_f1", "exact_match"),
    read_gold=_read_gold,
    agreement=qa_agreement,
    fooled=_fooled,
    fooled_threshold=DEFAULT_QA_F1_THRESHOLD,
    uses_qa_f1_threshold=True,
    extra_gold_fields=("answer_start",),
    written_required=("answer_start",),
    write_hint="send the answer and its answer_start in the context",
    form="span",
    noun="answer",
)
