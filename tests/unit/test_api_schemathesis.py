"""Schemathesis against the served OpenAPI document (WSGI, no network), as the admin: no
5xx, every status documented, every body as documented — per operation (stateless) and
along the links between operations (stateful). Bounded in count (``max_examples``, step
count) and in time (a cap after which the remaining examples send nothing)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import create_app
from store.ratelimits import RateLimits
from tests.unit.auth_helpers import issue_token
from usecases.service import Service

pytestmark = pytest.mark.slow  # measured, fuzzed or multi-process: the full lane only

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
CAP_S = 20.0  # per phase: beyond it the remaining examples return without a request
SETTINGS = settings(
    max_examples=5,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
    phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
)


class BudgetSpent(Exception):
    """A stateful run's time budget is spent: it ends at this step."""


class Cap:
    """A time budget: examples past it do nothing (a bound, never an assertion)."""

    def __init__(self, seconds: float) -> None:
        self.until = time.monotonic() + seconds

    def spent(self) -> bool:
        return time.monotonic() > self.until


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    opened = Service.open(tmp_path / "data")
    # Lifted so the writes reach their handlers (a 429 is documented, but only tests itself).
    opened.rate_limits = RateLimits(writes=100_000, logins=100_000)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def served(service: Service) -> tuple[Any, str, list[str]]:
    """The app (no workers: submissions stay queued), an admin token and the task names."""
    return create_app(service), issue_token(service), sorted(service.tasks)


def load(app: Any, token: str) -> Any:
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", app)
    schema.config.update(headers={"Authorization": f"Bearer {token}"})
    return schema


@pytest.mark.timeout(120)
def test_every_operation_conforms_stateless(served: tuple[Any, str, list[str]]) -> None:
    app, token, tasks = served
    schema = load(app, token)
    cap = Cap(CAP_S)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 10
    for operation in operations:
        # Random task names only meet 404s: a real one most of the time reaches the handlers.
        @given(case=operation.as_strategy(), task=st.sampled_from([*tasks, None]))
        @SETTINGS
        def check(case: Any, task: str | None) -> None:
            if cap.spent():
                return
            if task and "task_name" in (case.path_parameters or {}):
                case.path_parameters["task_name"] = task
            response = case.call()
            case.validate_response(response, checks=CHECKS)

        check()


@pytest.mark.timeout(120)
def test_linked_operations_conform_stateful(
    service: Service, served: tuple[Any, str, list[str]]
) -> None:
    app, token, _ = served
    schema = load(app, token)
    cap = Cap(CAP_S)
    current = [token]

    class Workflow(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            # A scenario may rotate or revoke the token it runs with: each gets its own.
            current[0] = issue_token(service)

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": {"Authorization": f"Bearer {current[0]}"}}

        def call(self, case: Any, **kwargs: Any) -> Any:
            return case.call(**kwargs)

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            case.validate_response(response, checks=CHECKS)

        def step(self, input: Any) -> Any:  # noqa: A002 - schemathesis' name
            # Past the budget the run ends at its next step (below), unless a step failed:
            # Hypothesis then replays the failing scenario, and the replay must fail alike.
            if cap.spent() and not failed:
                raise BudgetSpent
            steps.append(input)
            try:
                return super().step(input)
            except Exception:
                failed.append(input)
                raise

    steps: list[Any] = []
    failed: list[Any] = []
    # Rejecting the steps past the budget instead (assume) made a loaded machine's run
    # "unsatisfiable": its first scenario outlived the budget, and every later one was
    # rejected whole.
    with contextlib.suppress(BudgetSpent):
        Workflow.run(
            settings=settings(
                SETTINGS,
                max_examples=5,
                stateful_step_count=6,
            )
        )
    assert steps, "not one linked step ran within the budget"


# -- what it found, each pinned by a plain test ------------------------------------------------
def test_a_token_lifetime_past_year_9999_is_refused_not_a_500(
    served: tuple[Any, str, list[str]],
) -> None:
    app, token, _ = served
    client = app.test_client()
    headers = {"Authorization": f"Bearer {token}"}
    huge = client.post(
        "/api/v1/tokens", json={"name": "x", "expires_in_days": 6.6e16}, headers=headers
    )
    assert huge.status_code == 422, huge.get_json()
    fine = client.post(
        "/api/v1/tokens", json={"name": "y", "expires_in_days": 3650}, headers=headers
    )
    assert fine.status_code == 201, fine.get_json()


# -- every scope, and the schema as strict as the server ---------------------------------------
# Operations whose refusals depend on data, not on the request's shape: an opaque cursor, a
# task's round names, model ids, a dataset's or a tarball's contents, an axis named twice in
# one weights string. Their inputs cannot be written as a schema; everything else must be.
DATA_DEPENDENT = {
    ("GET", "/api/v1/submissions"),
    ("GET", "/api/v1/tasks/{task_name}/submissions"),
    ("GET", "/api/v1/tasks/{task_name}/leaderboard"),
    ("GET", "/api/v1/tasks/{task_name}/leaderboard/download"),
    ("POST", "/api/v1/tasks"),  # a spec is a task file: the parser, not a schema, checks it
    ("POST", "/api/v1/tasks/{task_name}/rounds"),
    ("POST", "/api/v1/tasks/{task_name}/rounds/{round_name}/datasets"),
    ("POST", "/api/v1/tasks/{task_name}/rounds/{round_name}/collection"),
    ("POST", "/api/v1/tasks/{task_name}/submissions"),
    ("POST", "/api/v1/tasks/{task_name}/views"),
    ("POST", "/api/v1/tasks/{task_name}/snapshots"),
}
SCOPE_SETS = (["read"], ["submit"], ["tokens"], ["read", "submit", "tokens", "admin"])


@pytest.mark.timeout(180)
@pytest.mark.parametrize("scopes", SCOPE_SETS, ids=lambda s: "+".join(s))
def test_every_operation_conforms_with_tokens_of_every_scope(
    service: Service, scopes: list[str]
) -> None:
    """A refusal by the rights table (401/403) is documented wherever it can happen."""
    app, tasks = create_app(service), sorted(service.tasks)
    schema = load(app, issue_token(service, "scoped", "admin", scopes))
    cap = Cap(CAP_S / 2)
    for operation in [result.ok() for result in schema.get_all_operations()]:

        @given(case=operation.as_strategy(), task=st.sampled_from(tasks))
        @settings(SETTINGS, max_examples=2)
        def check(case: Any, task: str) -> None:
            if cap.spent():
                return
            if "task_name" in (case.path_parameters or {}):
                case.path_parameters["task_name"] = task
            case.validate_response(case.call(), checks=CHECKS)

        check()


@pytest.mark.timeout(180)
def test_what_the_schema_allows_the_server_accepts(served: tuple[Any, str, list[str]]) -> None:
    """Schemathesis found the schema looser than the server in 13 places (weights with an
    exponent, names, URLs, token lifetimes...): valid-by-schema requests must not be 400 or
    422, except where the rule is about data a schema cannot describe (DATA_DEPENDENT)."""
    app, token, tasks = served
    schema = load(app, token)
    cap = Cap(CAP_S)
    checked = 0
    for operation in [result.ok() for result in schema.get_all_operations()]:
        if (operation.method.upper(), operation.path) in DATA_DEPENDENT:
            continue
        checked += 1

        @given(case=operation.as_strategy(), task=st.sampled_from(tasks))
        @settings(SETTINGS, max_examples=15)
        def check(case: Any, task: str) -> None:
            if cap.spent():
                return
            if "task_name" in (case.path_parameters or {}):
                case.path_parameters["task_name"] = task
            response = case.call()
            assert response.status_code not in (400, 422), (
                f"{case.method} {case.formatted_path} {case.query} {case.body!r:.300}: "
                f"{response.status_code} {response.text[:300]}"
            )

        check()
    assert checked > 30
