"""Dynascore axis weights: a viewer's preferences, validated once.

Axes a viewer does not mention keep their default weight (Dynaboard's sliders start from
the task defaults and a viewer moves some of them). Weights are non-negative finite
numbers, at least one positive; they are normalised to sum to 1 when scoring.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from configs.vocabulary.axes import AXES
from configs.vocabulary.numbers import WEIGHT_RULE, NotAWeight, parse_weight
from configs.vocabulary.registry import UnknownName

DEFAULT_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {"performance": 4, "throughput": 1, "memory": 1, "robustness": 1, "fairness": 1}
)


def _axis(name: str) -> str:
    if name in AXES:
        return name
    raise UnknownName("Dynascore axis", name, AXES)


def _weight(axis: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"the weight of {axis!r} must be a number, not {value!r}.")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"the weight of {axis!r} must be a finite number >= 0, not {value}.")
    return float(value)


@dataclass(frozen=True)
class Weights:
    """Weight per Dynascore axis; missing axes take ``DEFAULT_WEIGHTS``."""

    values: Mapping[str, float]

    def __post_init__(self) -> None:
        given = {_axis(axis): _weight(axis, value) for axis, value in self.values.items()}
        full = {axis: given.get(axis, float(DEFAULT_WEIGHTS[axis])) for axis in AXES}
        if not any(full.values()):
            raise ValueError("at least one Dynascore weight must be greater than 0.")
        if not math.isfinite(sum(full.values())):  # 1e308 + 1e308 overflows the normalisation
            raise ValueError("the Dynascore weights are too large to add up; use smaller numbers.")
        object.__setattr__(self, "values", MappingProxyType(full))

    @classmethod
    def default(cls) -> Weights:
        """Dynaboard's default weights."""
        return cls({})

    @classmethod
    def parse(cls, text: str) -> Weights:
        """Parse ``"performance:4,memory:0"``; an empty string gives the defaults."""
        given: dict[str, float] = {}
        items = [part.strip(" ") for part in text.split(",")] if text.strip(" ") else []
        if "" in items:
            raise ValueError(f"an axis weight is missing between commas in {text[:80]!r}.")
        for item in items:
            name, sep, raw = (piece.strip(" ") for piece in item.partition(":"))
            if not sep:
                raise ValueError(f"weight {item!r} is not of the form axis:number.")
            axis = _axis(name)
            if axis in given:
                raise ValueError(f"the weight of {axis!r} is given twice.")
            try:
                given[axis] = parse_weight(raw)
            except NotAWeight as exc:
                if exc.negative:  # "-1", "inf": a number, but not a weight
                    raise ValueError(
                        f"the weight of {axis!r} must be a finite number >= 0, not {raw}."
                    ) from None
                raise ValueError(
                    f"the weight of {axis!r} must be {WEIGHT_RULE}, not {raw[:40]!r}."
                ) from None
        return cls(given)

    @classmethod
    def coerce(cls, weights: Mapping[str, float] | Weights | None) -> Weights:
        """Accept ``Weights``, a partial mapping, or ``None`` (defaults)."""
        if weights is None:
            return cls.default()
        return weights if isinstance(weights, Weights) else cls(dict(weights))

    def normalized(self) -> dict[str, float]:
        """Weights divided by their sum."""
        total = sum(self.values.values())
        return {axis: value / total for axis, value in self.values.items()}

    def to_dict(self) -> dict[str, float]:
        """JSON-ready mapping of every axis to its (unnormalised) weight."""
        return dict(self.values)
