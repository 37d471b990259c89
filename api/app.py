"""The Flask application factory."""

from __future__ import annotations

from flask import Flask, jsonify, redirect
from flask_smorest import Api

from api import errors
from api.routes import blp
from api.service import Service


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
    api = Api(app)
    api.register_blueprint(blp)
    errors.install(app)

    @app.get("/")
    def index():  # type: ignore[no-untyped-def]
        return redirect("/api/v1/tasks")

    @app.get("/leaderboard/<task_name>")
    def leaderboard_json(task_name: str):  # type: ignore[no-untyped-def]
        return jsonify({"see": f"/api/v1/tasks/{task_name}/leaderboard"})

    return app
