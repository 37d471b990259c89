"""Every error leaves the API as JSON ``{"error": {"code": ..., "message": ...}}``."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from flask import Flask, jsonify, request
from flask.typing import ResponseReturnValue
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from werkzeug.exceptions import HTTPException

log = logging.getLogger(__name__)
RETRY_AFTER_S = 10  # what a client waits before asking again during a database outage
# The database is down, unreachable or out of connections: not the client's fault, not a bug.
DATABASE_OUTAGES = (OperationalError, InterfaceError, PoolTimeout)


class ApiError(Exception):
    """A client error with a machine-readable code and a sentence."""

    def __init__(
        self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = dict(headers or {})  # e.g. Retry-After on a 429


def error_body(code: str, message: str, details: object | None = None) -> dict:
    body: dict = {"error": {"code": code, "message": message}}
    if details:
        body["error"]["details"] = details
    return body


def install(app: Flask) -> None:
    """Register handlers so no request ends in an HTML page or a bare 500."""

    @app.errorhandler(ApiError)
    def _api_error(exc: ApiError) -> ResponseReturnValue:
        return jsonify(error_body(exc.code, exc.message)), exc.status, exc.headers

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> ResponseReturnValue:
        details = None
        data = getattr(exc, "data", None)
        if isinstance(data, dict) and "messages" in data:  # flask-smorest validation errors
            details = data["messages"]
        code = (exc.name or "error").lower().replace(" ", "_")
        message = exc.description or exc.name
        if details:
            message = f"invalid request: {_first_problem(details)}"
        return jsonify(error_body(code, message, details)), exc.code or 500, _headers(exc)

    for outage in DATABASE_OUTAGES:
        app.register_error_handler(outage, _database_unavailable)

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> ResponseReturnValue:
        log.exception("unhandled error")
        return jsonify(error_body("internal_error", "an unexpected error occurred")), 500


def _database_unavailable(exc: Exception) -> ResponseReturnValue:
    """503 with Retry-After, and one warning line: no traceback, no SQL, no parameters."""
    log.warning(
        "database unavailable (%s) on %s %s: %s",
        type(exc).__name__,
        request.method,
        request.path,
        outage_reason(exc),
    )
    body = error_body(
        "database_unavailable", "the database is unavailable; try again in a few seconds"
    )
    return jsonify(body), 503, {"Retry-After": str(RETRY_AFTER_S)}


def outage_reason(exc: Exception) -> str:
    """The driver's first line (``connection refused``...), never the statement or its
    parameters, which SQLAlchemy's own message quotes."""
    cause = exc.orig if isinstance(exc, DBAPIError) else exc
    lines = str(cause).strip().splitlines() or [type(cause).__name__]
    return lines[0][:200]


def _headers(exc: HTTPException) -> list[tuple[str, str]]:
    """The exception's own headers (``Allow`` on a 405, ``Retry-After`` on a 429 or 503,
    ``WWW-Authenticate`` on a 401...) without its HTML content type."""
    headers = [(k, v) for k, v in exc.get_headers() if k.lower() != "content-type"]
    data = getattr(exc, "data", None)  # flask-smorest's abort(..., headers=...)
    extra = data.get("headers") if isinstance(data, dict) else None
    if isinstance(extra, Mapping):
        headers += [(str(k), str(v)) for k, v in extra.items()]
    return headers


def _first_problem(details: object) -> str:
    """The first field and its message from a nested validation-error mapping."""
    path = []
    while isinstance(details, dict) and details:
        key, details = next(iter(details.items()))
        path.append(str(key))
    if isinstance(details, list) and details:
        details = details[0]
    location = ".".join(p for p in path if p not in ("json", "query", "form", "files"))
    return f"{location}: {details}" if location else str(details)
