"""What a submission's display name may be, for the API's schema and the CLI's check alike
(the pattern stays ECMA-compatible for the OpenAPI document)."""

from __future__ import annotations

import re

MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 ._\-]{0,127}$"
MODEL_NAME_RULE = "1-128 letters, digits, ' ._-'"


def is_model_name(name: str) -> bool:
    # fullmatch: ``$`` alone also matches before a final newline
    return re.fullmatch(MODEL_NAME_PATTERN, name) is not None
