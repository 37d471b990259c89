"""How a weight is written wherever a viewer writes one (the API's ``weights`` and
``rounds``, the page's address, downloads, the CLI): a plain decimal number, optionally
with a short exponent. Python's float() alone would also take "4_0", "+4", "1e308" or
"nan", so every surface parses with this one rule and answers alike."""

from __future__ import annotations

import re

from configs.vocabulary.axes import AXES

# Bounded, so whatever the pattern allows is a finite number; wide enough for any number a
# browser writes (17 significant digits, "1e-7"). ECMA-compatible for the OpenAPI document.
WEIGHT_NUMBER = r"(?:[0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})(?:[eE][+-]?[0-9]{1,2})?"


class NotAWeight(ValueError):
    """A weight written otherwise than WEIGHT_NUMBER; ``negative`` when it is one with a
    minus sign (a caller words that as "must be >= 0")."""

    def __init__(self, raw: str, negative: bool) -> None:
        super().__init__(f"{raw!r} is not a number >= 0 written in decimal (e.g. 4 or 0.5)")
        self.negative = negative


def parse_weight(raw: str) -> float:
    """``raw`` as a weight; NotAWeight unless it is written as WEIGHT_NUMBER."""
    text = raw.strip(" ")
    if re.fullmatch(WEIGHT_NUMBER, text) is None:
        negative = text.startswith("-") and re.fullmatch(WEIGHT_NUMBER, text[1:]) is not None
        raise NotAWeight(raw, negative or text.lower().lstrip("+-") in ("inf", "infinity"))
    return float(text)


_AXIS_WEIGHT = rf" *(?:{'|'.join(AXES)}) *: *{WEIGHT_NUMBER} *"
# What a viewer's ``weights`` may look like (the API's pattern, the page's address, forms,
# downloads): axis:number pairs separated by single commas; empty: the defaults.
WEIGHTS_PATTERN = rf"^(?:{_AXIS_WEIGHT}(?:,{_AXIS_WEIGHT})*)?$"
WEIGHT_RULE = (
    "a number >= 0 written in decimal, at most 20 digits each side of the point and a "
    "two-digit exponent (e.g. 4, 0.5 or 1e-3)"
)


def check_weights_syntax(text: str | None) -> None:
    """ValueError unless ``text`` matches WEIGHTS_PATTERN, the documented syntax (Python's
    float() alone would also take "4_0", "+4" or tabs, and a split on commas "4,,")."""
    if text and re.fullmatch(WEIGHTS_PATTERN, text) is None:
        raise ValueError(
            "weights are axis:number pairs separated by commas, numbers >= 0 written in "
            "decimal (e.g. performance:4,memory:0.5)"
        )
