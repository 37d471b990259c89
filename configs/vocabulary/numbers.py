"""How a weight is written wherever a viewer writes one (the API's ``weights`` and
``rounds``, the page's address, downloads, the CLI): a plain decimal number, optionally
with a short exponent. Python's float() alone would also take "4_0", "+4", "1e308" or
"nan", so every surface parses with this one rule and answers alike."""

from __future__ import annotations

import re

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
