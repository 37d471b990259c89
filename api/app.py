"""The Flask application factory."""

from __future__ import annotations

from flask import Flask, redirect
from flask_smorest import Api
from werkzeug.wrappers import Response

from api import errors
from api.routes import blp
from api.schemas import ErrorSchema
from api.service import Service


class DynaevalApi(Api):
    """flask-smorest's Api, documenting errors as they really leave (``api.errors``)."""

    ERROR_SCHEMA = ErrorSchema


def create_app(service: Service) -> Flask:
    """A Flask app serving ``service`` under ``/api/v1`` with its OpenAPI document."""
    app = Flask(__name__)
    app.config.update(
        API_TITLE="Dynaeval",
        API_VERSION="v1",
        OPENAPI_VERSION="3.0.3",
        OPENAPI_URL_PREFIX="/api/v1",
        OPENAPI_JSON_PATH="openapi.json",
        MAX_CONTENT_LENGTH=max(t.limits.max_image_bytes for t in service.tasks.values()) + 2**20,
        JSON_SORT_KEYS=False,
    )
    app.extensions["dynaeval"] = service
    api = DynaevalApi(app)
    api.register_blueprint(blp)
    errors.install(app)
    app.add_url_rule("/", "index", index)
    return app


def index() -> Response:
    """The API's entry point: the task list."""
    return redirect("/api/v1/tasks")
