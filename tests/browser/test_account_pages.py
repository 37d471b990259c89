"""The pages' account features in headless Chromium, on a server of their own (snapshots,
views and sessions are made here): sign in through the login form, freeze a snapshot with
the leaderboard's button and land on its page, save a view and open its page, sign out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from store.accounts import Accounts
from tests.browser.conftest import Live, serving
from tests.browser.seed import TASK, seed
from usecases.service import Service

pytestmark = pytest.mark.timeout(240)
PASSWORD = "a long browser password"


def _by(kind: str) -> Any:
    from selenium.webdriver.common.by import By

    return getattr(By, kind)


@pytest.fixture(scope="module")
def own_live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A seeded server on a free loopback port for this module, with a user who has a
    password."""
    service = Service.open(tmp_path_factory.mktemp("account-pages") / "data")
    ids = seed(service)
    Accounts(service.db, service.clock).add_user("page-alice", "researcher", PASSWORD)
    with serving(service, ids) as running:
        yield running


def _until(browser: Any, condition: Any) -> None:
    """Wait for a click's navigation (a click returns before the next page loads)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 20).until(condition)


def _arrive(browser: Any, address: str) -> None:
    _until(browser, lambda driver: driver.current_url.startswith(address))


def _sign_in(live: Live, browser: Any) -> None:
    browser.delete_all_cookies()
    browser.get(f"{live.url}/tasks/{TASK}")
    browser.find_element(_by("ID"), "sign-in-link").click()
    _arrive(browser, f"{live.url}/login?next=")
    browser.find_element(_by("ID"), "password").send_keys("wrong")
    browser.find_element(_by("ID"), "name").send_keys("page-alice")
    browser.find_element(_by("ID"), "sign-in").click()
    _until(browser, lambda d: d.find_elements(_by("ID"), "login-error"))
    assert "Wrong user name or password." in browser.find_element(_by("ID"), "login-error").text
    browser.find_element(_by("ID"), "name").send_keys("page-alice")
    browser.find_element(_by("ID"), "password").send_keys(PASSWORD)
    browser.find_element(_by("ID"), "sign-in").click()
    _arrive(browser, f"{live.url}/tasks/{TASK}")
    assert "signed in as page-alice" in browser.find_element(_by("ID"), "account").text


def test_sign_in_freeze_a_snapshot_and_save_a_view(
    own_live: Live, browser: Any, artifacts: Path
) -> None:
    _sign_in(own_live, browser)
    browser.save_screenshot(str(artifacts / "signed-in-leaderboard.png"))
    if not browser.find_elements(_by("ID"), "freeze"):
        pytest.skip("leaderboard.html does not include pages/_board_actions.html yet")
    browser.find_element(_by("ID"), "freeze").click()
    _arrive(browser, f"{own_live.url}/snapshots/")
    assert "snapshot" in browser.find_element(_by("ID"), "snapshot-label").text
    browser.save_screenshot(str(artifacts / "frozen-snapshot.png"))

    browser.get(f"{own_live.url}/tasks/{TASK}?weights=performance:1,memory:5")
    browser.find_element(_by("ID"), "view-name").send_keys("Memory matters")
    browser.find_element(_by("ID"), "save-view").click()
    # (the page's script then writes the weights into the address, as on the task page)
    _until(browser, lambda d: d.find_elements(_by("ID"), "view-info"))
    link = browser.find_element(_by("ID"), "view-url").get_attribute("href")
    assert link == f"{own_live.url}/tasks/{TASK}/views/memory-matters"
    info = browser.find_element(_by("ID"), "view-info").text
    assert "Memory matters" in info and "page-alice" in info
    assert float(browser.find_element(_by("ID"), "w_memory").get_attribute("value")) == 5.0
    browser.save_screenshot(str(artifacts / "view-page.png"))

    browser.find_element(_by("ID"), "sign-out").click()
    _until(browser, lambda d: d.find_elements(_by("ID"), "sign-in-link"))
    assert not browser.get_cookies()  # the session cookie is gone


def test_a_view_page_opened_by_its_address(own_live: Live, browser: Any, artifacts: Path) -> None:
    from store.views import NewView, Views

    task = own_live.service.tasks[TASK]
    weights = {**task.weights, "performance": 0.0, "memory": 5.0}
    rounds = {spec.name: float(spec.weight) for spec in task.rounds}
    view = Views(own_live.service.db).create_view(NewView(TASK, "Lean", weights, rounds, None))
    browser.delete_all_cookies()
    browser.get(f"{own_live.url}/tasks/{TASK}/views/{view['slug']}")
    assert "View “Lean”" in browser.find_element(_by("ID"), "view-info").text
    assert float(browser.find_element(_by("ID"), "w_performance").get_attribute("value")) == 0.0
    assert browser.find_elements(_by("CSS_SELECTOR"), "#leaderboard tbody tr")
    browser.save_screenshot(str(artifacts / "view-page-anonymous.png"))
    view_url = f"{own_live.url}/tasks/{TASK}/views/{view['slug']}"
    assert browser.current_url == view_url  # the view's own address while its weights show
    assert not browser.find_element(_by("ID"), "view-changed").is_displayed()
    _moved_away_from_the_view(own_live, browser, artifacts, view_url)
    browser.get(f"{own_live.url}/tasks/{TASK}/views/no-such-view")
    assert "has no view" in browser.find_element(_by("ID"), "message").text


def _moved_away_from_the_view(own_live: Live, browser: Any, artifacts: Path, url: str) -> None:
    """A slider moved on a view's page gave ``/views/<slug>?weights=…``, which shows the
    view's weights, not the moved ones (outside tester): the address now leads to the task's
    board with them, and moving back gives the view's address again."""
    from selenium.webdriver.common.keys import Keys

    slider = browser.find_element(_by("ID"), "w_memory")
    slider.send_keys(Keys.HOME)  # 5 -> 0
    _until(browser, lambda d: "/views/" not in d.current_url)
    moved = browser.current_url
    assert moved.startswith(f"{own_live.url}/tasks/{TASK}?") and "memory:0" in moved
    assert browser.find_element(_by("ID"), "view-changed").is_displayed()
    browser.save_screenshot(str(artifacts / "view-page-moved.png"))
    slider.send_keys(Keys.END)  # back to the view's 5
    _until(browser, lambda d: d.current_url == url)
    browser.get(moved)  # the copied link shows the moved weights
    assert float(browser.find_element(_by("ID"), "w_memory").get_attribute("value")) == 0.0
    browser.get(url)


def test_save_view_and_freeze_keep_the_sliders_weights(
    own_live: Live, browser: Any, artifacts: Path
) -> None:
    """Performance moved to 0 and saved: the view says 0, not the 4 the page loaded with;
    Robustness set to 5 and frozen: the snapshot says 5. With the script on, the note does
    not ask for an Apply button it hides."""
    from selenium.webdriver.common.keys import Keys

    from store.views import Views

    _sign_in(own_live, browser)
    browser.get(f"{own_live.url}/tasks/{TASK}?weights=performance:4")
    note = browser.find_element(_by("CSS_SELECTOR"), "#board-actions .sub").text
    assert "apply new weights first" not in note
    browser.find_element(_by("ID"), "w_performance").send_keys(Keys.HOME)  # 0
    browser.find_element(_by("ID"), "r_r1").send_keys(Keys.END)  # round r1 at 5
    browser.find_element(_by("ID"), "view-name").send_keys("No performance")
    browser.find_element(_by("ID"), "save-view").click()
    _until(browser, lambda d: d.find_elements(_by("ID"), "view-info"))
    [saved] = [v for v in Views(own_live.service.db).views(TASK) if v["name"] == "No performance"]
    assert saved["weights"]["performance"] == 0.0, saved
    assert saved["round_weights"]["r1"] == 5.0, saved

    browser.get(f"{own_live.url}/tasks/{TASK}")
    browser.find_element(_by("ID"), "w_robustness").send_keys(Keys.END)  # 5
    browser.find_element(_by("ID"), "freeze").click()
    _arrive(browser, f"{own_live.url}/snapshots/")
    snapshot_id = browser.current_url.rstrip("/").rsplit("/", 1)[1]
    frozen = Views(own_live.service.db).snapshot(snapshot_id)
    assert frozen is not None and frozen["weights"]["robustness"] == 5.0, frozen
    browser.save_screenshot(str(artifacts / "frozen-with-slider-weights.png"))
