"""The OpenAPI document tells the truth: it validates, documents the submission body in
both content types, every route's error responses, and no parameter a route ignores."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from flask_smorest import Blueprint
from openapi_spec_validator import validate

from api.app import create_app
from usecases.service import Service

SUBMISSIONS = "/api/v1/tasks/{task_name}/submissions"
# (path, method) -> the 4xx statuses the route can answer with
ERRORS = {
    ("/api/v1/tasks/{task_name}", "get"): {"404"},
    ("/api/v1/tasks/{task_name}/leaderboard", "get"): {"400", "404", "422"},
    ("/api/v1/tasks/{task_name}/quota", "get"): {"401", "403", "404"},
    (SUBMISSIONS, "get"): {"400", "401", "403", "404", "422"},
    (SUBMISSIONS, "post"): {"400", "401", "403", "404", "409", "413", "422", "429"},
    ("/api/v1/tasks/{task_name}/uploads", "post"): {"401", "403", "404", "413", "422", "429"},
    ("/api/v1/uploads", "get"): {"401", "403"},
    ("/api/v1/uploads/{upload_id}", "get"): {"401", "403", "404"},
    ("/api/v1/uploads/{upload_id}", "delete"): {"401", "403", "404", "409", "429"},
    ("/api/v1/uploads/{upload_id}/parts/{number}", "put"): {
        "400",
        "401",
        "403",
        "404",
        "409",
        "422",
        "429",
    },
    ("/api/v1/submissions/{model_id}", "get"): {"404"},
    ("/api/v1/submissions/{model_id}/scores", "get"): {"404"},
    ("/api/v1/submissions/{model_id}/compare/{other_id}", "get"): {"401", "403", "404", "409"},
    ("/api/v1/submissions", "get"): {"400", "401", "403", "404", "422"},
    ("/api/v1/submissions/{model_id}/cancel", "post"): {"401", "403", "404", "409", "429"},
    ("/api/v1/submissions/{model_id}/results/download", "get"): {"401", "403", "404", "422"},
    ("/api/v1/health", "get"): set(),
    ("/api/v1/ready", "get"): set(),  # 503 not_ready: not a client error
    ("/api/v1/tasks", "get"): set(),
    # accounts (api/accounts.py)
    ("/api/v1/session", "post"): {"401", "403", "422", "429"},
    ("/api/v1/session", "delete"): {"401", "403", "429"},
    ("/api/v1/me", "get"): {"401"},
    ("/api/v1/tokens", "get"): {"401", "403"},
    ("/api/v1/tokens", "post"): {"401", "403", "422", "429"},
    ("/api/v1/tokens/{token_id}", "delete"): {"401", "403", "404", "429"},
    ("/api/v1/tokens/{token_id}/rotate", "post"): {"401", "403", "404", "422", "429"},
    ("/api/v1/users", "get"): {"401", "403"},
    ("/api/v1/users", "post"): {"401", "403", "409", "422", "429"},
    ("/api/v1/tasks/{task_name}/access", "put"): {"401", "403", "404", "422", "429"},
    ("/api/v1/submissions/{model_id}/rerun", "post"): {"401", "403", "404", "409", "429"},
    ("/api/v1/submissions/{model_id}/publication", "put"): {"401", "403", "404", "422", "429"},
    # downloads (api/pages/downloads.py)
    ("/api/v1/tasks/{task_name}/leaderboard/download", "get"): {"400", "404", "422"},
    ("/api/v1/submissions/{model_id}/scores/download", "get"): {"404", "422"},
    # views and snapshots (api/views.py)
    ("/api/v1/tasks/{task_name}/views", "get"): {"404"},
    ("/api/v1/tasks/{task_name}/views", "post"): {"401", "403", "404", "422", "429"},
    ("/api/v1/views/{view_id}", "get"): {"404"},
    ("/api/v1/views/{view_id}", "delete"): {"401", "403", "404", "429"},
    ("/api/v1/tasks/{task_name}/default-view", "put"): {"401", "403", "404", "422", "429"},
    ("/api/v1/tasks/{task_name}/snapshots", "post"): {"401", "403", "404", "422", "429"},
    ("/api/v1/snapshots/{snapshot_id}", "get"): {"404"},
    # creating a task (api/task_creation.py)
    ("/api/v1/tasks", "post"): {"400", "401", "403", "409", "413", "422", "429"},
    # rounds and datasets (api/rounds.py)
    ("/api/v1/tasks/{task_name}/rounds", "get"): {"404"},
    ("/api/v1/tasks/{task_name}/rounds", "post"): {
        "400",
        "401",
        "403",
        "404",
        "409",
        "413",
        "422",
        "429",
    },
    ("/api/v1/tasks/{task_name}/rounds/{round_name}/datasets", "post"): {
        "400",
        "401",
        "403",
        "404",
        "409",
        "413",
        "422",
        "429",
    },
    ("/api/v1/tasks/{task_name}/rounds/{round_name}", "patch"): {
        "400",
        "401",
        "403",
        "404",
        "409",
        "422",
        "429",
    },
    # validation and vMER (api/validation.py)
    ("/api/v1/tasks/{task_name}/rounds/{round_name}/validation", "get"): {
        "401",
        "403",
        "404",
        "422",
    },
    ("/api/v1/tasks/{task_name}/rounds/{round_name}/vmer", "get"): {"404"},
    ("/api/v1/examples/{example_id}/votes", "post"): {
        "400",
        "401",
        "403",
        "404",
        "409",
        "422",
        "429",
    },
    ("/api/v1/examples/{example_id}/votes", "get"): {"401", "403", "404"},
    ("/api/v1/examples/{example_id}/settle", "post"): {
        "400",
        "401",
        "403",
        "404",
        "409",
        "422",
        "429",
    },
    # collection (api/collection.py)
    ("/api/v1/tasks/{task_name}/rounds/{round_name}/collection", "post"): {
        "400",
        "401",
        "403",
        "404",
        "409",
        "422",
        "429",
    },
    ("/api/v1/tasks/{task_name}/rounds/{round_name}/collection", "get"): {"404"},
    ("/api/v1/tasks/{task_name}/rounds/{round_name}/collection/close", "post"): {
        "401",
        "403",
        "404",
        "409",
        "429",
    },
    ("/api/v1/tasks/{task_name}/rounds/{round_name}/examples", "post"): {
        "400",
        "401",
        "403",
        "404",
        "409",
        "422",
        "429",
    },
    ("/api/v1/tasks/{task_name}/rounds/{round_name}/examples", "get"): {"404", "422"},
    ("/api/v1/tasks/{task_name}/rounds/{round_name}/examples/export", "get"): {
        "401",
        "403",
        "404",
    },
    # freezing a collection round (api/collection_freeze.py)
    ("/api/v1/tasks/{task_name}/rounds/{round_name}/freeze", "post"): {
        "401",
        "403",
        "404",
        "409",
        "413",
        "422",
        "429",
    },
    # the automated adversary (api/adversary.py)
    ("/api/v1/tasks/{task_name}/rounds/{round_name}/adversary", "post"): {
        "401",
        "403",
        "404",
        "409",
        "422",
        "429",
    },
    ("/api/v1/tasks/{task_name}/rounds/{round_name}/adversary", "get"): {"404"},
    # webhooks (api/webhooks.py)
    ("/api/v1/webhooks", "get"): {"401", "403", "422"},
    ("/api/v1/webhooks", "post"): {"400", "401", "403", "404", "409", "422", "429"},
    ("/api/v1/webhooks/{webhook_id}", "get"): {"401", "403", "404"},
    ("/api/v1/webhooks/{webhook_id}", "delete"): {"401", "403", "404", "429"},
    ("/api/v1/webhooks/{webhook_id}/rotate-secret", "post"): {"401", "403", "404", "429"},
    ("/api/v1/webhooks/{webhook_id}/deliveries", "get"): {"401", "403", "404", "422"},
    ("/api/v1/webhooks/{webhook_id}/test", "post"): {"401", "403", "404", "429"},
}


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    service = Service.open(Path(tmp_path_factory.mktemp("openapi")) / "data")
    try:
        yield create_app(service).test_client().get("/api/v1/openapi.json").get_json()
    finally:
        service.close()


def resolve(spec: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with a local ``$ref`` followed."""
    while "$ref" in node:
        *_, kind, name = node["$ref"].split("/")
        node = spec["components"][kind][name]
    return node


def test_the_document_is_valid_openapi(spec: dict[str, Any]) -> None:
    validate(spec)


def test_submission_body_is_documented_in_both_content_types(spec: dict[str, Any]) -> None:
    body = spec["paths"][SUBMISSIONS]["post"]["requestBody"]
    assert body["required"] is True
    content = body["content"]
    assert set(content) == {"application/json", "multipart/form-data"}
    as_json = resolve(spec, content["application/json"]["schema"])
    assert as_json["required"] == ["name"]  # and one of runtime and upload
    assert {"runtime", "upload", "protocol"} <= set(as_json["properties"])
    runtime = resolve(spec, as_json["properties"]["runtime"])
    assert runtime["properties"]["kind"]["enum"] == ["docker", "process", "url"]
    assert "requirements" in as_json["properties"]
    form = resolve(spec, content["multipart/form-data"]["schema"])
    assert set(form["properties"]) == {"name", "protocol", "publish", "requirements", "image"}
    assert form["properties"]["image"] == {
        **form["properties"]["image"],
        "type": "string",
        "format": "binary",
    }
    assert {"name", "image"} <= set(form["required"])


def _case_id(value: object) -> str:
    """A parameter's test id; a set's members sorted, so every xdist worker names it alike."""
    return str(sorted(value) if isinstance(value, set | frozenset) else value)


@pytest.mark.parametrize(("route", "statuses"), ERRORS.items(), ids=_case_id)
def test_every_route_lists_its_error_responses(
    spec: dict[str, Any], route: tuple[str, str], statuses: set[str]
) -> None:
    path, method = route
    responses = spec["paths"][path][method]["responses"]
    assert {s for s in responses if s.startswith("4")} == statuses
    for status in statuses:
        schema = resolve(spec, resolve(spec, responses[status])["content"]["application/json"])
        error = resolve(spec, schema["schema"])
        assert set(error["properties"]) == {"error"}
        body = resolve(spec, error["properties"]["error"])
        assert set(body["properties"]) == {"code", "message", "details"}
        assert set(body["required"]) == {"code", "message"}


def test_every_documented_operation_is_in_the_table(spec: dict[str, Any]) -> None:
    documented = {
        (path, method)
        for path, item in spec["paths"].items()
        for method in item
        if method in ("get", "post", "put", "patch", "delete")
    }
    assert documented == set(ERRORS)


def test_default_error_uses_the_real_error_shape(spec: dict[str, Any]) -> None:
    default = spec["components"]["responses"]["DEFAULT_ERROR"]
    error = resolve(spec, default["content"]["application/json"]["schema"])
    assert set(error["properties"]) == {"error"}


def test_task_submissions_list_documents_no_ignored_task_parameter(
    spec: dict[str, Any],
) -> None:
    params = spec["paths"][SUBMISSIONS]["get"].get("parameters", [])
    assert [p["name"] for p in params if p["in"] == "query"] == ["limit", "fields", "cursor"]
    across = spec["paths"]["/api/v1/submissions"]["get"]["parameters"]
    assert {p["name"] for p in across} == {"task", "limit", "cursor", "fields"}


def test_success_bodies_are_documented(spec: dict[str, Any]) -> None:
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if method == "parameters":
                continue
            success = [s for s in operation["responses"] if s.startswith("2")]
            assert success, (path, method)
            content = operation["responses"][success[0]]["content"]
            typed = content.get("application/json") or content["application/x-ndjson"]
            assert "$ref" in typed["schema"], (path, method)


def test_security_is_declared(spec: dict[str, Any]) -> None:
    """Bearer tokens and the login cookie are the schemes; routes that need them say so
    (and document 401), public routes list anonymous access first."""
    schemes = spec["components"]["securitySchemes"]
    assert schemes["bearerAuth"] == {**schemes["bearerAuth"], "type": "http", "scheme": "bearer"}
    assert schemes["sessionCookie"]["in"] == "cookie"
    for (path, method), statuses in ERRORS.items():
        security = spec["paths"][path][method].get("security")
        assert security, (path, method)
        public = path == "/api/v1/session" and method == "post"  # the login: 401 = bad password
        assert ({} in security) == (public or "401" not in statuses), (path, method)


def test_the_document_written_on_first_read_is_the_same_for_readers_at_once(
    spec: dict[str, Any], tmp_path: Path
) -> None:
    """The document is written when first read: readers arriving together on a new app all
    get the whole of it, the rights included, exactly as a later reader does."""
    service = Service.open(tmp_path / "data")
    try:
        app = create_app(service)
        barrier = threading.Barrier(4)

        def read() -> dict[str, Any]:
            barrier.wait()
            got: dict[str, Any] = app.test_client().get("/api/v1/openapi.json").get_json()
            return got

        with ThreadPoolExecutor(4) as pool:
            documents = list(pool.map(lambda _: read(), range(4)))
        later = app.test_client().get("/api/v1/openapi.json").get_json()
    finally:
        service.close()
    assert all(document == spec for document in documents)
    assert later == spec
    submit = spec["paths"][SUBMISSIONS]["post"]
    assert submit["x-required-scope"] == "submit" and "401" in submit["responses"]


def test_a_blueprint_registered_after_a_read_is_documented_with_its_rights(
    tmp_path: Path,
) -> None:
    service = Service.open(tmp_path / "data")
    try:
        app = create_app(service)
        api = app.extensions["flask-smorest"]["blp_name_to_api"]["uploads"]
        assert "/api/v1/late" not in api.spec.to_dict()["paths"]
        late = Blueprint("late", __name__, url_prefix="/api/v1")

        @late.route("/late")
        @late.response(200)
        def late_route() -> dict[str, Any]:
            return {}

        api.register_blueprint(late)
        document = api.spec.to_dict()
    finally:
        service.close()
    assert "late" in [tag["name"] for tag in document["tags"]]
    assert "get" in document["paths"]["/api/v1/late"]
    assert document["paths"][SUBMISSIONS]["post"]["x-required-scope"] == "submit"


def test_a_reader_arriving_while_the_rights_are_written_waits_for_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rights are written last: a second reader arriving meanwhile must wait for them,
    not take the document without its security and scopes."""
    from api import auth

    writing, go_on = threading.Event(), threading.Event()
    document_rights = auth.document_rights

    def slow_rights(spec: Any) -> None:
        writing.set()
        go_on.wait(5)
        document_rights(spec)

    monkeypatch.setattr(auth, "document_rights", slow_rights)
    service = Service.open(tmp_path / "data")
    try:
        app = create_app(service)
        api = app.extensions["flask-smorest"]["blp_name_to_api"]["uploads"]
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(lambda: api.spec)
            assert writing.wait(5)
            second = pool.submit(  # what it sees when it gets the document
                lambda: api.spec.to_dict()["paths"][SUBMISSIONS]["post"].get("x-required-scope")
            )
            time.sleep(0.2)  # the second reader has arrived; the rights are not written yet
            go_on.set()
            first.result(5)
            scope = second.result(5)
    finally:
        service.close()
    assert scope == "submit"
