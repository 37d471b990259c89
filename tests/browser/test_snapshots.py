"""Snapshots and saved views in headless Chromium, on a server of their own (a model is
scored mid-test, which the shared server's other tests must not see): a snapshot page stays
the same after a new model is scored, and a view's URL restores its weights on the page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.browser.conftest import Live, serving
from tests.browser.seed import TASK, seed
from tests.unit.auth_helpers import issue_token
from tests.unit.test_api import AXES_A, finished
from usecases.service import Service

pytestmark = pytest.mark.timeout(240)


def _by(kind: str) -> Any:
    from selenium.webdriver.common.by import By

    return getattr(By, kind)


@pytest.fixture(scope="module")
def own_live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A seeded server on a free loopback port for this module only."""
    service = Service.open(tmp_path_factory.mktemp("snapshots") / "data")
    ids = seed(service)
    with serving(service, ids) as running:
        yield running


def _post(live: Live, path: str, body: dict[str, Any]) -> dict[str, Any]:
    token = issue_token(live.service, "page-user", "researcher")
    response = requests.post(
        live.url + path, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def _snapshot_table(driver: Any) -> list[str]:
    rows = driver.find_elements(_by("CSS_SELECTOR"), "#snapshot-table tbody tr")
    return [row.text for row in rows]


def test_a_snapshot_page_stays_the_same_after_a_new_model_is_scored(
    own_live: Live, browser: Any, artifacts: Path
) -> None:
    snapshot = _post(own_live, f"/api/v1/tasks/{TASK}/snapshots", {})
    browser.get(own_live.url + snapshot["url"])
    label = browser.find_element(_by("ID"), "snapshot-label").text
    assert "snapshot" in label and snapshot["created_at"][:10] in label
    before = _snapshot_table(browser)
    assert len(before) == len(snapshot["leaderboard"]["models"]) >= 2
    source_before = browser.page_source

    finished(own_live.service, "late-model", {**AXES_A, "performance": 99.5}, task=TASK)
    live_board = own_live.api(f"/api/v1/tasks/{TASK}/leaderboard")
    assert "late-model" in [m["name"] for m in live_board["models"]]

    browser.get(own_live.url + snapshot["url"])
    assert _snapshot_table(browser) == before
    assert browser.page_source == source_before
    assert "late-model" not in browser.page_source
    browser.save_screenshot(str(artifacts / "snapshot.png"))


def test_a_view_url_restores_its_weights_on_the_page(own_live: Live, browser: Any) -> None:
    body = {"name": "Memory matters", "weights": {"performance": 1, "memory": 5},
            "round_weights": {"r1": 2}}  # fmt: skip
    view = _post(own_live, f"/api/v1/tasks/{TASK}/views", body)
    browser.get(own_live.url + view["url"])
    assert "Memory matters" in browser.find_element(_by("ID"), "view-info").text  # its own page
    for axis, value in view["weights"].items():
        slider = browser.find_element(_by("ID"), f"w_{axis}")
        assert float(slider.get_attribute("value")) == value, axis
    assert float(browser.find_element(_by("ID"), "r_r1").get_attribute("value")) == 2.0
    # the address keeps sharing the view: its own, which restores the weights (a query
    # beside it was ignored by the view's page, so a moved slider's was misleading)
    assert browser.current_url == own_live.url + view["url"]
