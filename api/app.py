"""The Flask application factory."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from apispec import APISpec
from flask import Flask
from flask_smorest import Api, Blueprint
from werkzeug.wrappers import Response

from api import auth, bodies, compression, errors, metrics, ratelimit
from api.accounts import blp as accounts_blp
from api.adversary import blp as adversary_blp
from api.collection import blp as collection_blp
from api.collection_freeze import blp as freezing_blp
from api.pages.collection import collect_pages
from api.pages.downloads import downloads
from api.pages.index import index as pages_index
from api.pages.round import round_pages
from api.pages.site import pages
from api.rounds import blp as rounds_blp
from api.routes import blp
from api.routing import SharedRulesFlask
from api.schemas import ErrorSchema
from api.task_creation import blp as task_creation_blp
from api.uploads import blp as uploads_blp
from api.validation import blp as validation_blp
from api.views import blp as views_blp
from api.views import view_pages
from api.webhooks import blp as webhooks_blp
from usecases.service import Service


class DynaevalApi(Api):
    """flask-smorest's Api, documenting errors as they really leave (``api.errors``).

    Routes are served as soon as a blueprint is registered; their OpenAPI documentation is
    written the first time the document is read. Writing it costs more than the rest of
    making an app, and a server (or a test) that never serves the document never pays."""

    ERROR_SCHEMA = ErrorSchema

    def __init__(self, app: Flask, **kwargs: Any) -> None:
        self._undocumented: list[tuple[Blueprint, str, list[Any] | None]] = []
        self._finishers: list[Callable[[APISpec], None]] = []
        self._documenting = threading.Lock()
        self._document: APISpec | None = None
        super().__init__(app, **kwargs)

    @property
    def spec(self) -> APISpec | None:
        """The OpenAPI document, every registered blueprint written into it."""
        if self._undocumented:
            self._write_documentation()
        return self._document

    @spec.setter
    def spec(self, value: APISpec | None) -> None:
        self._document = value

    def register_blueprint(
        self, blp: Blueprint, *, parameters: list[Any] | None = None, **options: Any
    ) -> None:
        """Serve ``blp`` now; document it when the document is first read."""
        name = options.get("name", blp.name)
        self._app.extensions["flask-smorest"]["blp_name_to_api"][name] = self
        self._app.register_blueprint(blp, **options)
        with self._documenting:
            self._undocumented.append((blp, name, parameters))

    def finish_document(self, finisher: Callable[[APISpec], None]) -> None:
        """Run ``finisher`` on the document each time blueprints are written into it."""
        self._finishers.append(finisher)

    def _write_documentation(self) -> None:
        with self._documenting:  # two first readers at once write it once
            if not self._undocumented or self._document is None:
                return
            for blp, name, parameters in self._undocumented:
                blp.register_views_in_doc(
                    self, self._app, self._document, name=name, parameters=parameters
                )
                self._document.tag({"name": name, "description": blp.description})
            for finish in self._finishers:
                finish(self._document)
            # emptied last: until then a reader finds work left and waits on the lock,
            # instead of taking a document the finishers are still writing
            self._undocumented.clear()


def create_app(service: Service, allowed_hosts: Iterable[str] | None = None) -> Flask:
    """A Flask app serving ``service`` under ``/api/v1`` with its OpenAPI document,
    answering only for ``allowed_hosts`` (default: loopback names, any port)."""
    app = SharedRulesFlask(__name__)
    app.config.update(
        API_TITLE="Dynaeval",
        API_VERSION="v1",
        OPENAPI_VERSION="3.0.3",
        OPENAPI_URL_PREFIX="/api/v1",
        OPENAPI_JSON_PATH="openapi.json",
        MAX_CONTENT_LENGTH=max(t.limits.max_image_bytes for t in service.tasks.values()) + 2**20,
        JSON_SORT_KEYS=False,
        API_SPEC_OPTIONS={"components": {"securitySchemes": auth.SECURITY_SCHEMES}},
    )
    app.extensions["dynaeval"] = service
    api = DynaevalApi(app, spec_kwargs={"extra_plugins": [ratelimit.RateLimitDocs()]})
    api.register_blueprint(blp)
    api.register_blueprint(accounts_blp)
    api.register_blueprint(views_blp)
    api.register_blueprint(rounds_blp)
    api.register_blueprint(task_creation_blp)
    api.register_blueprint(webhooks_blp)
    api.register_blueprint(collection_blp)
    api.register_blueprint(validation_blp)
    api.register_blueprint(freezing_blp)
    api.register_blueprint(adversary_blp)
    api.register_blueprint(uploads_blp)
    api.register_blueprint(downloads)
    api.finish_document(auth.document_rights)
    app.register_blueprint(pages)
    app.register_blueprint(view_pages)
    app.register_blueprint(round_pages)
    app.register_blueprint(collect_pages)
    auth.install(app, allowed_hosts)
    ratelimit.install(app)  # after auth: writes are counted per principal
    errors.install(app)
    bodies.install(app)
    compression.install(app)  # every response passes it on its way out
    app.add_url_rule("/", "index", index)
    metrics.install(app, service)  # outside the OpenAPI document: an operator's route
    return app


def index() -> Response | str:
    """The entry point: the task list page in a browser, ``/api/v1/tasks`` for API clients."""
    return pages_index()
