"""Every error leaves the API as JSON ``{"error": {"code": ..., "message": ...}}``."""

from __future__ import annotations

import logging

from flask import Flask, jsonify
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import HTTPException

log = logging.getLogger(__name__)


class ApiError(Exception):
    """A client error with a machine-readable code and a sentence."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def error_body(code: str, message: str, details: object | None = None) -> dict:
    body: dict = {"error": {"code": code, "message": message}}
    if details:
        body["error"]["details"] = details
    return body


def install(app: Flask) -> None:
    """Register handlers so no request ends in an HTML page or a bare 500."""

    @app.errorhandler(ApiError)
    def _api_error(exc: ApiError) -> ResponseReturnValue:
        return jsonify(error_body(exc.code, exc.message)), exc.status

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
        return jsonify(error_body(code, message, details)), exc.code or 500

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> ResponseReturnValue:
        log.exception("unhandled error")
        return jsonify(error_body("internal_error", "an unexpected error occurred")), 500


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
