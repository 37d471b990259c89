"""Input checks shared by the metric modules."""

from __future__ import annotations

from collections.abc import Sized


def check_pair(gold: Sized, pred: Sized) -> int:
    """Return the common length of ``gold`` and ``pred``; raise if empty or mismatched."""
    if len(gold) != len(pred):
        raise ValueError(
            f"gold and predictions differ in length: {len(gold)} gold, {len(pred)} predictions."
        )
    if len(gold) == 0:
        raise ValueError("cannot score an empty set of examples.")
    return len(gold)
