"""The registry of task output types (``metrics.outputs.base.OutputType``): label, answer
(extractive span), translation and vqa (short answers against several annotators'). A task names its type in ``output.type``."""

from __future__ import annotations

from collections.abc import Sequence

from configs.vocabulary.registry import Registry
from metrics.outputs.base import BadGold, Gold, OutputType
from metrics.outputs.label import LABEL
from metrics.outputs.span import SPAN
from metrics.outputs.translation import TRANSLATION
from metrics.outputs.vqa import VQA

OUTPUT_TYPES: Registry[OutputType] = Registry("output type")
for _type in (LABEL, SPAN, TRANSLATION, VQA):
    OUTPUT_TYPES.add(_type.name, _type)


def get_output_type(name: str) -> OutputType:
    """The registered output type called ``name`` (UnknownName with a suggestion)."""
    return OUTPUT_TYPES.get(name)


def agreement(output_type: str, original: Sequence[str], perturbed: Sequence[str]) -> float | None:
    """A model's agreement with itself by its output type's rule (0..100), or ``None``
    when there is nothing to compare."""
    rule = get_output_type(output_type).agreement
    if len(original) == 0 and len(perturbed) == 0:
        return None
    return rule(original, perturbed)


__all__ = ["BadGold", "Gold", "OUTPUT_TYPES", "OutputType", "agreement", "get_output_type"]
