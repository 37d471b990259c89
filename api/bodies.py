"""JSON request bodies: at most ``MAX_JSON_BYTES`` (uploads are multipart and have their
own limits), and a body nested deeply enough to exhaust the JSON parser is a 400
``bad_json`` on every route, not a 500."""

from __future__ import annotations

import typing

import flask
import flask_smorest
from flask import Flask, request
from webargs import core
from webargs.flaskparser import FlaskParser, is_json_request

from api.errors import ApiError

MAX_JSON_BYTES = 4 * 2**20  # the largest JSON body any route takes (adversary seeds)


class SafeJsonParser(FlaskParser):
    """webargs' Flask parser, with a too-deep body refused like any unreadable one."""

    def _raw_load_json(self, req: flask.Request) -> typing.Any:
        if not is_json_request(req):
            return core.missing
        try:
            return core.parse_json(req.get_data(cache=True))
        except RecursionError:
            raise ApiError(400, "bad_json", "the body is not JSON (nested too deeply)") from None


class Blueprint(flask_smorest.Blueprint):
    """The API's blueprints: their arguments go through the safe parser (webargs binds it
    when a route is declared, so every route module takes its Blueprint from here)."""

    ARGUMENTS_PARSER = SafeJsonParser()


def install(app: Flask) -> None:
    """JSON bodies are capped (a longer one is 413 before it is read)."""

    @app.before_request
    def _cap_json_bodies() -> None:
        if request.mimetype == "application/json" or request.mimetype.endswith("+json"):
            request.max_content_length = MAX_JSON_BYTES
