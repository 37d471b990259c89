"""Large pages, JSON and downloads sent gzip-compressed to clients that accept it: a
10,000-model leaderboard page is 11 MB as written and 2.6 MB compressed. Level 1: the
server's CPU matters more than the last bytes (the embedded and local cases send over
loopback, where compression saves little)."""

from __future__ import annotations

import gzip

from flask import Flask, request
from werkzeug.wrappers import Response

COMPRESS_FROM_BYTES = 256 * 1024
COMPRESSED_TYPES = frozenset({"text/html", "application/json", "text/csv", "text/plain"})


def compressed(response: Response) -> Response:
    """``response`` gzip-compressed when it is large, of a text type, and asked for so."""
    if (
        response.direct_passthrough
        or response.is_streamed
        or response.status_code != 200
        or "Content-Encoding" in response.headers
        or response.mimetype not in COMPRESSED_TYPES
        or request.accept_encodings.quality("gzip") <= 0
    ):
        return response
    data = response.get_data()
    if len(data) < COMPRESS_FROM_BYTES:
        return response
    response.set_data(gzip.compress(data, compresslevel=1))
    response.headers["Content-Encoding"] = "gzip"
    response.vary.add("Accept-Encoding")
    return response


def install(app: Flask) -> None:
    app.after_request(compressed)
