"""AMRS-based Dynascore over a table of per-model metrics (pure numpy / pandas)."""

from dynascore.dynascore import (
    AXES,
    DEFAULT_INSTANCE_MEMORY_GIB,
    DEFAULT_WEIGHTS,
    Weights,
    amrs,
    average_rounds,
    compute,
    score_utilities,
    utilities,
)

__all__ = [
    "AXES",
    "DEFAULT_INSTANCE_MEMORY_GIB",
    "DEFAULT_WEIGHTS",
    "Weights",
    "amrs",
    "average_rounds",
    "compute",
    "score_utilities",
    "utilities",
]
