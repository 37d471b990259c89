"""Every error leaves the API as JSON ``{"error": {"code": ..., "message": ...}}``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flask import Flask, jsonify, request
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import HTTPException

from configs.vocabulary.refusals import Kind, Refused
from store.outages import DATABASE_OUTAGES, outage_reason

log = logging.getLogger(__name__)
RETRY_AFTER_S = 10  # what a client waits before asking again during a database outage
# the status each kind of use-case refusal is answered with
STATUS: dict[Kind, int] = {
    "invalid": 422,
    "not_found": 404,
    "forbidden": 403,
    "conflict": 409,
    "too_large": 413,
    "too_many": 429,
    "unavailable": 503,
}


class ApiError(Exception):
    """A client error with a machine-readable code and a sentence."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        headers: Mapping[str, str] | None = None,
        details: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = dict(headers or {})  # e.g. Retry-After on a 429
        self.details = dict(details or {})  # what a client acts on (e.g. the parts missing)


def from_refusal(refused: Refused) -> ApiError:
    """The HTTP answer to a use case's refusal."""
    headers = {}
    if refused.retry_after_s is not None:
        headers["Retry-After"] = str(refused.retry_after_s)
    return ApiError(STATUS[refused.kind], refused.code, refused.message, headers, refused.details)


# A message quotes what was asked for (an id, a name): one from a URL of thousands of
# characters was answered whole (outside testers); a sentence needs far less.
MAX_MESSAGE = 600


def error_body(code: str, message: str, details: object | None = None) -> dict[str, Any]:
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 1] + "…"
    body: dict[str, Any] = {"error": {"code": code, "message": message}}
    if details:
        body["error"]["details"] = details
    return body


def install(app: Flask) -> None:
    """Register handlers so no request ends in an HTML page or a bare 500."""

    @app.errorhandler(ApiError)
    def _api_error(exc: ApiError) -> ResponseReturnValue:
        return jsonify(error_body(exc.code, exc.message, exc.details)), exc.status, exc.headers

    @app.errorhandler(Refused)
    def _refused(exc: Refused) -> ResponseReturnValue:
        return _api_error(from_refusal(exc))

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> ResponseReturnValue:
        details = None
        data = getattr(exc, "data", None)
        if isinstance(data, dict) and "messages" in data:  # flask-smorest validation errors
            details = data["messages"]
        code = (exc.name or "error").lower().replace(" ", "_")
        message = exc.description or exc.name
        if exc.code == 413:  # say the limit the body went over
            limit = request.max_content_length
            code = "body_too_large"
            message = "the request body is too large" + (
                f" (this route takes at most {limit} bytes)" if limit else ""
            )
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
