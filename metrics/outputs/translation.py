"""Machine translation: the model answers a translation of the source; gold is one or more
reference translations (``references`` lists any beyond the first).

Agreement under perturbation is chrF++ between the model's output on the perturbed source
and its own output on the original. Fooled: the sentence chrF++ of the translation against
the writer's references is below the threshold (0..100).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from metrics.outputs.base import BadGold, Gold, OutputType, text_field
from metrics.translation import chrf_agreement, sentence_chrf, spbleu_available

MORE_REFERENCES = "references"
DEFAULT_CHRF_THRESHOLD = 40.0


def _read_gold(row: Mapping[str, Any], key: str, labels: Sequence[str]) -> Gold:
    first = text_field(row, key)
    more = row.get(MORE_REFERENCES, [])
    if not isinstance(more, list) or not all(isinstance(ref, str) for ref in more):
        raise BadGold(f"{MORE_REFERENCES!r} must be a list of strings")
    if not first.strip() or not all(ref.strip() for ref in more):
        raise BadGold("a reference translation is empty")
    return Gold(first, tuple(more))


def _fooled(intended: Sequence[str], given: str, threshold: float) -> bool:
    return sentence_chrf(given, intended) < threshold


TRANSLATION = OutputType(
    name="translation",
    key="translation",
    reported=("chrf", "bleu"),
    optional=spbleu_available,
    read_gold=_read_gold,
    agreement=chrf_agreement,
    fooled=_fooled,
    fooled_threshold=DEFAULT_CHRF_THRESHOLD,
    threshold_range=(0.0, 100.0),  # sentence chrF++; a task sets its own
    renamable=True,
    several_references=True,
    secondary_intervals=True,
    extra_gold_fields=(MORE_REFERENCES,),
    write_hint="send a reference translation",
    form="text",
    noun="translation",
)
