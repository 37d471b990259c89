"""Request bodies as JSON bytes, with image fields spliced in rather than escaped.

A batch of a VQA task is mostly base64 pictures: json's escaping scan over each one costs
more than the model's whole reply. Base64 needs no escaping, so an image field's value
that holds only the base64 alphabet (checked, at a fifth of the cost of escaping) goes
into the body between quotes as it is; anything else is escaped as usual. The bytes are
the ones ``json.dumps`` would write.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Collection
from typing import Any

from configs.vocabulary.images import plain_base64

_MIN_SPLICED = 256  # shorter values are escaped as usual: splicing them gains nothing


def dump_body(payload: Any, image_fields: Collection[str]) -> bytes:
    """``json.dumps(payload).encode()``, splicing long base64 values of ``image_fields``."""
    if not image_fields:
        return json.dumps(payload).encode()
    token = f"dynaeval-image-{secrets.token_hex(8)}-"
    spliced: list[str] = []

    def stand_in(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: _value(key, item) for key, item in node.items()}
        if isinstance(node, list):
            return [stand_in(item) for item in node]
        return node

    def _value(key: Any, item: Any) -> Any:
        long_text = isinstance(item, str) and len(item) >= _MIN_SPLICED
        if key in image_fields and long_text and plain_base64(item):
            spliced.append(item)
            return f"{token}{len(spliced) - 1}"
        return stand_in(item)

    text = json.dumps(stand_in(payload))
    if not spliced:
        return text.encode()
    pattern = re.compile(f'"{re.escape(token)}(\\d+)"')
    return pattern.sub(lambda m: f'"{spliced[int(m.group(1))]}"', text).encode()
