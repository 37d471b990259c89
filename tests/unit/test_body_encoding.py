"""Request bodies with image fields spliced in are the bytes json.dumps writes."""

from __future__ import annotations

import base64
import json
import random

import pytest

from configs.vocabulary.images import plain_base64
from evaluator.transport.encoding import dump_body


def b64(n: int, seed: int = 0) -> str:
    return base64.b64encode(random.Random(seed).randbytes(n)).decode()


@pytest.mark.parametrize(
    "image",
    [
        b64(3000),
        b64(10),  # short: escaped as usual
        'not base64 "quoted" \\ é \n' * 40,  # not the alphabet: escaped as usual
        b64(3000)[:-4] + "\u00e9===",  # one non-ASCII character
        "dynaeval-image-0000000000000000-0" * 10,  # looks like the stand-in token
    ],
)
def test_the_body_is_exactly_what_json_dumps_writes(image: str) -> None:
    payload = {
        "task": "vqa",
        "instances": [
            {"uid": "w1", "image": image, "question": 'What is "dynaeval-image-x-0"?'},
            {"uid": "w2", "image": b64(2000, 1), "question": "Und ä?"},
        ],
        "meta": [{"image": image}, 3, None, 1.5],
    }
    assert dump_body(payload, {"image"}) == json.dumps(payload).encode()
    assert json.loads(dump_body(payload, {"image"})) == payload


def test_no_image_fields_is_plain_json_and_the_alphabet_check_is_strict() -> None:
    payload = {"instances": [{"statement": "x" * 1000}]}
    assert dump_body(payload, ()) == json.dumps(payload).encode()
    assert plain_base64(b64(300)) and not plain_base64(b64(300) + "\n")
    assert not plain_base64(b64(300) + '"') and not plain_base64("ab\x00c")
