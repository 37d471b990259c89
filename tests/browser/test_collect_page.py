"""The collection page in headless Chromium: sign in through the login form, write an
example on the round's page and see the model's answer (a fake live pool answers)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from store.accounts import Accounts
from store.collection import Collection, Settings
from tests.browser.conftest import Live, serving
from tests.browser.seed import TASK, seed
from tests.unit.test_collection_api import FakePool
from usecases.service import Service

pytestmark = pytest.mark.timeout(240)
PASSWORD = "a long browser password"
ROUND = "c1"


def _by(kind: str) -> Any:
    from selenium.webdriver.common.by import By

    return getattr(By, kind)


@pytest.fixture(scope="module")
def collect_live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Live, FakePool]]:
    """A seeded server with a round open for collection and a fake live pool."""
    service = Service.open(tmp_path_factory.mktemp("collect-page") / "data")
    ids = seed(service)
    Accounts(service.db, service.clock).add_user("page-writer", "researcher", PASSWORD)
    model = next(model_id for name, model_id in ids.items() if name != "failed")
    Collection(service.db, service.clock).open(TASK, ROUND, [model], Settings(), None)
    pool = FakePool()
    service.live = pool  # type: ignore[assignment]
    with serving(service, ids) as running:
        yield running, pool


def test_write_an_example_and_see_the_answer(
    collect_live: tuple[Live, FakePool], browser: Any
) -> None:
    from selenium.webdriver.support.ui import Select, WebDriverWait

    live, pool = collect_live
    page = f"{live.url}/tasks/{TASK}/rounds/{ROUND}/collect"
    browser.delete_all_cookies()
    browser.get(page)
    browser.find_element(_by("ID"), "collect-sign-in").click()
    WebDriverWait(browser, 20).until(lambda d: d.find_elements(_by("ID"), "name"))
    browser.find_element(_by("ID"), "name").send_keys("page-writer")
    browser.find_element(_by("ID"), "password").send_keys(PASSWORD)
    browser.find_element(_by("ID"), "sign-in").click()
    WebDriverWait(browser, 20).until(lambda d: d.find_elements(_by("ID"), "collect"))
    assert browser.current_url == page

    text = "I expected to hate it, and I was not disappointed"
    browser.find_element(_by("ID"), "input_statement").send_keys(text)
    Select(browser.find_element(_by("ID"), "label")).select_by_value("negative")
    browser.find_element(_by("ID"), "send").click()
    WebDriverWait(browser, 20).until(lambda d: d.find_elements(_by("ID"), "verdict"))
    assert browser.find_element(_by("ID"), "verdict").text == "You fooled the model"
    assert browser.find_element(_by("ID"), "model-answer").text == "positive"
    assert [inputs for _, inputs in pool.calls] == [{"statement": text}]  # never the label
