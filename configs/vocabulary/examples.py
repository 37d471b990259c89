"""States that flow through an evaluation: examples in, predictions out (frozen)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Example:
    """One held-out row. ``inputs`` holds only the task's input fields (what the model sees);
    ``target`` is the gold label (classification), answer text (QA) or first reference
    translation; ``references`` holds any further references. ``slices`` holds the slice
    columns (e.g. targeted group). ``answer_start`` is the QA answer's character offset
    into ``inputs['context']`` (None for other tasks)."""

    uid: str
    inputs: Mapping[str, str]
    target: str
    slices: Mapping[str, str] = field(default_factory=dict)
    answer_start: int | None = None
    references: tuple[str, ...] = ()

    def request_instance(self, wire_id: str) -> dict[str, Any]:
        """The JSON object sent to a model: an opaque per-request id (``evaluator.transport.wire_ids``)
        plus the input fields, never the dataset uid, the target or slices."""
        return {"uid": wire_id, **self.inputs}


@dataclass(frozen=True)
class Prediction:
    """A validated model answer for one example: ``output`` is the label or the answer text."""

    uid: str
    output: str
    probs: Mapping[str, float] | None = None
