"""A long leaderboard (300 models) in headless Chromium: the table shows the rows around
the viewport (rows.js), always in the API's order at their places in the ranking, reached
by scrolling and by Tab; every row is in the DOM after "Show every row", and without
JavaScript the server's pages of 100 rows walk the whole ranking."""

from __future__ import annotations

import random
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import Live, serving
from tests.browser.seed import TASK, finish, result
from usecases.service import Service

N_MODELS = 300
pytestmark = pytest.mark.timeout(240)

# The rows in the DOM: model id, rank and place in the ranking (aria-rowindex - 2).
ROWS_JS = """
var table = document.getElementById('leaderboard');
return {
  rows: Array.prototype.map.call(table.querySelectorAll('tbody tr[data-model-id]'), function (r) {
    var index = r.getAttribute('aria-rowindex');
    return [r.getAttribute('data-model-id'), Number(r.getAttribute('data-rank')),
            index === null ? null : Number(index) - 2];
  }),
  count: table.getAttribute('aria-rowcount'),
  windowed: table.classList.contains('windowed')
};
"""

# Scroll so that ranking place arguments[0] is at the top of the viewport; done two frames
# later (the window follows a scroll in the next frame).
SCROLL_JS = """
var done = arguments[arguments.length - 1], table = document.getElementById('leaderboard');
var body = table.tBodies[0], rows = Number(table.getAttribute('aria-rowcount')) - 1;
var y = window.scrollY + body.getBoundingClientRect().top;
window.scrollTo(0, y + arguments[0] * body.getBoundingClientRect().height / rows);
requestAnimationFrame(function () { requestAnimationFrame(function () { setTimeout(done, 0); }); });
"""

FRAMES_JS = """
var done = arguments[arguments.length - 1];
requestAnimationFrame(function () { requestAnimationFrame(function () { setTimeout(done, 0); }); });
"""


@pytest.fixture(scope="module")
def long_board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A server whose sentiment board has ``N_MODELS`` scored models with varied axes."""
    service = Service.open(tmp_path_factory.mktemp("rows") / "data")
    rng = random.Random(7)
    ids = {}
    for i in range(N_MODELS):
        perf = [rng.uniform(30, 97) for _ in range(3)]
        evaluation = result(
            service,
            perf,
            10 ** rng.uniform(1, 4.5),
            10 ** rng.uniform(-2, 0.2),
            rng.uniform(55, 100),
            rng.uniform(55, 100),
            seed=i + 1,
        )
        ids[f"m{i:03d}"] = finish(service, f"m{i:03d}", evaluation)
    with serving(service, ids) as running:
        yield running


def _by(kind: str) -> Any:
    from selenium.webdriver.common.by import By

    return getattr(By, kind)


def api_order(live: Live, driver: Any) -> list[tuple[str, int]]:
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(driver.current_url).query)
    weights = {"weights": query["weights"][0]} if "weights" in query else {}
    board = live.api(f"/api/v1/tasks/{TASK}/leaderboard", limit=str(N_MODELS), **weights)
    return [(m["model_id"], m["rank"]) for m in board["models"]]


def assert_window_in_api_order(live: Live, driver: Any) -> list[int]:
    """The rows shown are consecutive places of the API's ranking; returns those places."""
    shown = driver.execute_script(ROWS_JS)
    expected = api_order(live, driver)
    assert shown["windowed"], "300 rows should be shown as a window"
    assert int(shown["count"]) == len(expected) + 1  # the header row counts
    places = [r[2] for r in shown["rows"]]
    assert places == list(range(places[0], places[0] + len(places)))
    assert 20 <= len(places) < len(expected)
    for model_id, rank, place in shown["rows"]:
        assert (model_id, rank) == expected[place], place
    return places


def open_long(driver: Any, live: Live, query: str = "") -> None:
    driver.get(f"{live.url}/tasks/{TASK}{query}")
    driver.find_element(_by("CSS_SELECTOR"), "#leaderboard tbody tr[data-model-id]")


def test_the_window_follows_sliders_and_scrolling_in_api_order(
    browser: Any, long_board: Live
) -> None:
    from selenium.webdriver.common.keys import Keys

    open_long(browser, long_board)
    assert assert_window_in_api_order(long_board, browser)[0] == 0
    for axis, key in (("memory", Keys.END), ("throughput", Keys.HOME)):
        browser.find_element(_by("ID"), f"w_{axis}").send_keys(key)
        assert assert_window_in_api_order(long_board, browser)[0] == 0
    for place in (150, N_MODELS - 3):
        browser.execute_async_script(SCROLL_JS, place)
        assert place in assert_window_in_api_order(long_board, browser)
    # a re-rank while scrolled down re-ranks the rows in view
    browser.execute_script(
        "document.getElementById('w_fairness').value = '5';"
        "document.getElementById('w_fairness').dispatchEvent("
        "new Event('input', {bubbles: true}));"
    )
    assert N_MODELS - 3 in assert_window_in_api_order(long_board, browser)
    # the contributions table is a window of the same ranking
    units = browser.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll("
        "'#units tbody tr[data-model-id]'), function (r) {"
        "return [r.getAttribute('data-model-id'), Number(r.getAttribute('aria-rowindex')) - 2]; });"
    )
    expected = [m for m, _ in api_order(long_board, browser)]
    assert units and all(expected[place] == model_id for model_id, place in units)


def test_tab_reaches_rows_beyond_the_first_window(browser: Any, long_board: Live) -> None:
    from selenium.webdriver.common.keys import Keys

    long_board.sign_in(browser)  # model links (one per row) are the admins'
    try:
        open_long(browser, long_board)
        first_window = assert_window_in_api_order(long_board, browser)
        link = browser.find_element(_by("CSS_SELECTOR"), "#leaderboard tbody th a")
        browser.execute_script("arguments[0].focus()", link)
        expected = [m for m, _ in api_order(long_board, browser)]
        steps = len(first_window) + 10
        for _ in range(steps):
            browser.switch_to.active_element.send_keys(Keys.TAB)
            browser.execute_async_script(FRAMES_JS)
        focused = browser.execute_script(
            "var tr = document.activeElement.closest('tr');"
            "return tr && [tr.getAttribute('data-model-id'), tr.getAttribute('aria-rowindex')];"
        )
        assert focused, "Tab left the table"
        assert int(focused[1]) - 2 == steps
        assert focused[0] == expected[steps]
        assert_window_in_api_order(long_board, browser)
    finally:
        long_board.sign_out(browser)


def test_show_every_row_puts_the_whole_ranking_in_the_dom(browser: Any, long_board: Live) -> None:
    open_long(browser, long_board, "?weights=performance:1,throughput:5,memory:2")
    note = browser.find_element(_by("ID"), "rows-note")
    assert note.is_displayed()
    browser.find_element(_by("ID"), "all-rows").click()
    shown = browser.execute_script(ROWS_JS)
    assert not shown["windowed"] and shown["count"] is None
    assert [(m, r) for m, r, _ in shown["rows"]] == api_order(long_board, browser)
    browser.find_element(_by("ID"), "all-rows").click()  # back to the window
    assert_window_in_api_order(long_board, browser)


def test_without_javascript_the_pages_of_the_ranking_hold_every_row(
    browser_without_js: Any, long_board: Live
) -> None:
    """The server writes 100 rows a page; Next and Previous walk the whole ranking, the
    weights kept, in the API's order."""
    driver = browser_without_js
    open_long(driver, long_board, "?weights=performance:1,throughput:5,memory:2")
    expected = api_order(long_board, driver)
    shown: list[tuple[str, int]] = []
    pages = []
    while True:
        rows = driver.find_elements(_by("CSS_SELECTOR"), "#leaderboard tbody tr")
        shown += [
            (r.get_attribute("data-model-id"), int(r.get_attribute("data-rank"))) for r in rows
        ]
        nav = driver.find_element(_by("ID"), "row-pages")
        assert nav.is_displayed()
        pages.append(nav.text.split(")")[0])
        following = driver.find_elements(_by("CSS_SELECTOR"), "#row-pages a[rel=next]")
        if not following:
            break
        following[0].click()
        assert "weights=performance:1,throughput:5,memory:2" in driver.current_url
    assert shown == expected
    assert pages[-1] == f"Ranks 201–{N_MODELS} of {N_MODELS} (page 3 of 3"
    driver.find_element(_by("CSS_SELECTOR"), "#row-pages a[rel=prev]").click()
    rows = driver.find_elements(_by("CSS_SELECTOR"), "#leaderboard tbody tr")
    assert [r.get_attribute("data-model-id") for r in rows] == [m for m, _ in expected[100:200]]
    table = driver.find_element(_by("ID"), "leaderboard")
    assert "windowed" not in (table.get_attribute("class") or "")


def test_with_javascript_the_pages_links_give_way_to_every_row(
    browser: Any, long_board: Live
) -> None:
    open_long(browser, long_board, "?page=2")
    assert not browser.find_element(_by("ID"), "row-pages").is_displayed()
    browser.execute_async_script(FRAMES_JS)
    shown = assert_window_in_api_order(long_board, browser)  # the page's first row in view
    assert 100 in shown and shown[0] > 0, shown


def test_the_plots_draw_the_top_of_the_ranking_and_the_whole_front(
    browser: Any, long_board: Live
) -> None:
    """At 300 models the plots show the top 100 under the weights, plus every model on the
    board's Pareto front, and say so; the legend names the top 100."""
    open_long(browser, long_board, "?weights=performance:1,throughput:5,memory:2")
    browser.execute_script("document.getElementById('plots').scrollIntoView();")
    browser.execute_async_script(FRAMES_JS)
    note = browser.find_element(_by("ID"), "plots-note")
    assert note.is_displayed() and "top 100 of the 300" in note.text
    top = [m for m, _ in api_order(long_board, browser)[:100]]
    series = browser.find_elements(_by("CSS_SELECTOR"), "#plot-rounds g.series")
    assert len(series) == 100
    legend = browser.find_elements(_by("CSS_SELECTOR"), "#plot-throughput .legend span")
    assert len(legend) == 100
    board = long_board.api(f"/api/v1/tasks/{TASK}/leaderboard", limit=str(N_MODELS))
    rows = {m["model_id"]: m for m in board["models"]}
    front = {
        i
        for i, p in rows.items()
        if not any(
            q is not p
            and q["throughput"] >= p["throughput"]
            and q["performance"] >= p["performance"]
            and (q["throughput"] > p["throughput"] or q["performance"] > p["performance"])
            for q in rows.values()
        )
    }
    drawn = browser.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll("
        "'#plot-throughput [data-model-id]'), function (m) { return m.getAttribute('data-model-id'); });"
    )
    assert set(drawn) == set(top) | front


def test_no_column_collapses_in_the_window_at_1366_by_900(
    browser: Any, long_board: Live, artifacts: Path
) -> None:
    """The window keeps the widths the server's rows had: the model column once got 0 px
    (a name written a letter a line) once fixed widths filled 1366 px."""
    browser.set_window_size(1366, 900)
    try:
        open_long(browser, long_board)
        widths = browser.execute_script(
            "var t = document.getElementById('leaderboard');"
            "return {table: t.classList.contains('windowed'), cells: Array.prototype.map.call("
            "t.querySelector('tbody tr[data-model-id]').cells, function (c) {"
            " return [c.getBoundingClientRect().width, c.scrollWidth, c.getBoundingClientRect().height]; })};"
        )
        assert widths["table"]
        for width, needed, _ in widths["cells"]:
            assert width >= 30 and needed <= width + 1, widths
        name_cell = widths["cells"][1]
        assert name_cell[2] < 80, "the model's name wraps letter by letter"
        browser.save_screenshot(str(artifacts / "leaderboard-300-1366x900.png"))
    finally:
        browser.set_window_size(1440, 1000)


@pytest.mark.parametrize("height", [850, 900, 960])
def test_scrolling_to_the_end_shows_the_last_row(
    browser: Any, long_board: Live, height: int
) -> None:
    """The window reaches the last place of the ranking whatever its height: an odd
    window once ended a row short (a blank spacer where the last model belonged)."""
    browser.set_window_size(1366, height)
    try:
        open_long(browser, long_board)
        browser.execute_script("window.scrollTo(0, document.body.scrollHeight);")
        browser.execute_async_script(FRAMES_JS)
        browser.execute_async_script(FRAMES_JS)
        for table in ("leaderboard", "units"):
            last = browser.execute_script(
                f"var rows = document.querySelectorAll('#{table} tbody tr[data-model-id]');"
                "return rows[rows.length - 1].getAttribute('aria-rowindex');"
            )
            assert int(last) - 2 == N_MODELS - 1, (table, last)
    finally:
        browser.set_window_size(1440, 1000)
