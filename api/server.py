"""The HTTP server ``dynaeval serve`` runs: werkzeug's, minus what it says on its own.

Errors the HTTP layer answers before the app sees a request (a request line over 64 KiB,
a malformed request line or header) leave in the API's JSON error shape, not as an HTML
page, and no response names the server software or its version (``Server: Werkzeug/3.x
Python/3.x`` told a scanner which exploits to try).
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from flask import Flask
from werkzeug.exceptions import default_exceptions
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from api.errors import error_body

SERVER_BANNER = "Dynaeval"


class ApiRequestHandler(WSGIRequestHandler):
    """Werkzeug's handler with a neutral ``Server`` header and JSON transport errors."""

    @property
    def server_version(self) -> str:  # type: ignore[override]
        return SERVER_BANNER  # also the WSGI SERVER_SOFTWARE

    def version_string(self) -> str:
        return SERVER_BANNER  # the Server header: no software version, no Python version

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """``{"error": {"code", "message"}}`` instead of http.server's HTML page."""
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "Error"
        known = default_exceptions.get(code)
        name = (known().name if known is not None else phrase) or "error"
        slug = name.lower().replace(" ", "_").replace("-", "_")
        body = json.dumps(error_body(slug, message or phrase)).encode()
        self.log_error("code %d, message %s", code, message)
        self.send_response(code, phrase)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        body_allowed = code >= 200 and code not in (HTTPStatus.NO_CONTENT, HTTPStatus.NOT_MODIFIED)
        if body_allowed:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body_allowed:
            self.wfile.write(body)
        self.close_connection = True


def make_api_server(host: str, port: int, app: Flask, **options: Any) -> BaseWSGIServer:
    """A threaded server for ``app`` answering with :class:`ApiRequestHandler`."""
    return make_server(host, port, app, threaded=True, request_handler=ApiRequestHandler, **options)
