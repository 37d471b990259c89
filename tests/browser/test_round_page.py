"""A collection round's page in headless Chromium (no JavaScript needed): the vMER table is
a real table, and a signed-in validator judges the next example with the plain form."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from store.accounts import Accounts
from tests.browser.conftest import Live, serving
from tests.unit.test_validation_api import ROUND, add_example, open_round
from usecases.service import Service

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def round_live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A server with one open round holding one settled and one waiting example."""
    service = Service.open(tmp_path_factory.mktemp("round-page") / "data")
    author = Accounts(service.db).add_user("writer", "researcher")["id"]
    open_round(service.db, "sentiment")
    settled = add_example(service.db, "sentiment", author, verdict="correct", settled_by="votes")
    waiting = add_example(service.db, "sentiment", author)
    with serving(service, {"settled": settled, "waiting": waiting}) as running:
        yield running


def test_the_page_shows_vmer_and_a_validator_votes(
    round_live: Live, browser_without_js: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser_without_js
    round_live.sign_in(driver)  # an admin: a validator who wrote neither example
    driver.get(f"{round_live.url}/tasks/sentiment/rounds/{ROUND}")
    row = driver.find_element(By.CSS_SELECTOR, '#vmer-writers tr[data-writer="writer"]')
    cells = [c.text for c in row.find_elements(By.CSS_SELECTOR, "th, td")]
    assert cells == ["writer", "2", "2", "1", "0", "1", "0", "50.0 %"]
    hidden = driver.find_element(By.CSS_SELECTOR, 'input[name="example_id"]')
    assert hidden.get_attribute("value") == round_live.ids["waiting"]
    driver.find_element(By.ID, "vote-correct").click()
    WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.ID, "voted"))
    assert "voted=correct" in driver.current_url
    assert driver.find_element(By.ID, "voted").text.startswith("Your vote (correct)")
    assert driver.find_element(By.ID, "queue-empty").is_displayed()
