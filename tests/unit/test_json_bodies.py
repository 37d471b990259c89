"""JSON bodies on every route: nested deeply enough to exhaust the parser is 400
``bad_json`` (it was a 500 on most routes), and more than MAX_JSON_BYTES is 413 before it
is parsed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask.testing import FlaskClient

from api.app import create_app
from api.bodies import MAX_JSON_BYTES
from tests.unit.auth_helpers import issue_token, signed_in
from usecases.service import Service

DEEP = (
    '{"inputs": {"statement": "a"}, "label": "neutral", "deep": '
    + "[" * 20_000
    + "]" * 20_000
    + "}"
)
ROUTES = [
    "/api/v1/tasks/sentiment/rounds/r9/examples",
    "/api/v1/tasks/sentiment/rounds/r9/collection",
    "/api/v1/tasks/sentiment/views",
    "/api/v1/tasks/sentiment/snapshots",
    "/api/v1/tasks/sentiment/rounds/r9/adversary",
    "/api/v1/examples/some-example/votes",
    "/api/v1/webhooks",
    "/api/v1/tokens",
    "/api/v1/tasks/sentiment/submissions",
]


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FlaskClient]:
    service = Service.open(tmp_path_factory.mktemp("bodies") / "data")
    try:
        yield signed_in(create_app(service).test_client(), issue_token(service))
    finally:
        service.close()


@pytest.mark.parametrize("route", ROUTES)
def test_a_body_nested_too_deeply_is_a_400(admin: FlaskClient, route: str) -> None:
    answer = admin.post(route, data=DEEP, content_type="application/json")
    assert answer.status_code == 400, answer.get_data(as_text=True)[:300]
    assert answer.get_json()["error"]["code"] == "bad_json"


@pytest.mark.parametrize("route", ROUTES[:3])
def test_a_json_body_over_the_cap_is_a_413(admin: FlaskClient, route: str) -> None:
    big = '{"pad": "' + "x" * MAX_JSON_BYTES + '"}'
    answer = admin.post(route, data=big, content_type="application/json")
    assert answer.status_code == 413 and answer.is_json
