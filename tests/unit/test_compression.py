"""Large responses leave gzip-compressed for clients that accept gzip, and only then; small
ones, errors and clients that do not ask are sent as they are."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask, Response

from api.compression import COMPRESS_FROM_BYTES, compressed


@pytest.fixture
def app() -> Iterator[Flask]:
    made = Flask(__name__)
    big = "x" * (COMPRESS_FROM_BYTES + 1)

    @made.route("/big")
    def big_page() -> str:
        return big

    @made.route("/big.json")
    def big_json() -> Response:
        return Response(json.dumps({"a": big}), mimetype="application/json")

    @made.route("/small")
    def small() -> str:
        return "small"

    @made.route("/missing")
    def missing() -> tuple[str, int]:
        return big, 404

    @made.route("/image")
    def image() -> Response:
        return Response(b"\x89PNG" + b"0" * COMPRESS_FROM_BYTES, mimetype="image/png")

    made.after_request(compressed)
    yield made


@pytest.mark.parametrize("path", ["/big", "/big.json"])
def test_a_large_text_response_is_compressed_when_asked(app: Flask, path: str) -> None:
    plain = app.test_client().get(path)
    assert "Content-Encoding" not in plain.headers
    zipped = app.test_client().get(path, headers={"Accept-Encoding": "gzip, deflate"})
    assert zipped.headers["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in zipped.headers["Vary"]
    assert gzip.decompress(zipped.data) == plain.data
    assert int(zipped.headers["Content-Length"]) == len(zipped.data) < len(plain.data) / 10


@pytest.mark.parametrize(
    ("path", "accept"),
    [("/small", "gzip"), ("/missing", "gzip"), ("/image", "gzip"), ("/big", "identity"),
     ("/big", "gzip;q=0")],
)  # fmt: skip
def test_everything_else_is_sent_as_it_is(app: Flask, path: str, accept: str) -> None:
    response = app.test_client().get(path, headers={"Accept-Encoding": accept})
    assert "Content-Encoding" not in response.headers


def test_the_app_compresses_its_responses(tmp_path: Path) -> None:
    from api.app import create_app
    from usecases.service import Service

    service = Service.open(tmp_path / "data")
    try:
        client = create_app(service).test_client()
        assert client.get("/tasks/sentiment").status_code == 200
        assert compressed in create_app(service).after_request_funcs[None]
    finally:
        service.close()
