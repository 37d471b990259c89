"""Classification: the model answers one of the task's labels; gold is one label."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from metrics.agreement import label_agreement
from metrics.outputs.base import BadGold, Gold, OutputType, text_field


def _read_gold(row: Mapping[str, Any], key: str, labels: Sequence[str]) -> Gold:
    label = text_field(row, key)
    if label not in labels:
        raise BadGold(f"label {label!r} not in {list(labels)}")
    return Gold(label)


def _fooled(intended: Sequence[str], given: str, threshold: float) -> bool:
    # Labels compare exactly, as accuracy compares them; a dialect's letter-case folding
    # has mapped the model's label onto the task's own before a prediction exists.
    return given != intended[0]


LABEL = OutputType(
    name="label",
    key="label",
    reported=(),
    read_gold=_read_gold,
    agreement=label_agreement,
    fooled=_fooled,
    fooled_threshold=0.0,
    takes_labels=True,
    write_hint="choose one of {labels}",
    form="choice",
    noun="label",
)
