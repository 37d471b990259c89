"""AMRS-based Dynascore over a table of per-model metrics (pure numpy / pandas)."""

from configs.vocabulary.axes import AXES
from dynascore.dynascore import (
    DEFAULT_INSTANCE_MEMORY_GIB,
    amrs,
    compute,
    score_utilities,
    utilities,
)
from dynascore.rounds import average_rounds
from dynascore.stability import flip_points, flip_weights, group_by_overlap, tie_groups
from dynascore.weights import DEFAULT_WEIGHTS, Weights

__all__ = [
    "AXES",
    "DEFAULT_INSTANCE_MEMORY_GIB",
    "DEFAULT_WEIGHTS",
    "Weights",
    "amrs",
    "average_rounds",
    "compute",
    "flip_points",
    "flip_weights",
    "group_by_overlap",
    "score_utilities",
    "tie_groups",
    "utilities",
]
