"""A long leaderboard page (the same path as 10,000 models, at 230): the server writes one
page of 100 rows, the script's data holds every row, the viewer's links come from one query
(not two per row), and ``?page=`` walks the ranking without a script."""

from __future__ import annotations

import json
import random
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from store.accounts import Accounts
from tests.browser.seed import finish, result
from tests.templates import built_once
from tests.unit.test_rounds_api import client
from usecases.boards.page import PAGE_ROWS, RowPage
from usecases.service import Service

N_MODELS = 230
BOARD = "/api/v1/tasks/sentiment/leaderboard"


def _seed(folder: Path) -> None:
    service = Service.open(folder / "data")
    try:
        ids = _finished_models(service)
    finally:
        service.close()
    (folder / "ids.json").write_text(json.dumps(ids))


def _finished_models(service: Service) -> list[str]:
    rng = random.Random(3)
    ids = []
    for i in range(N_MODELS):
        evaluation = result(
            service,
            [rng.uniform(30, 97) for _ in range(3)],
            10 ** rng.uniform(1, 4.5),
            10 ** rng.uniform(-2, 0.2),
            rng.uniform(55, 100),
            rng.uniform(55, 100),
            seed=i + 1,
        )
        ids.append(finish(service, f"m{i:03d}", evaluation))
    Accounts(service.db).set_published(ids[5], True)
    return ids


@pytest.fixture(scope="module")
def long_board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, list[str]]]:
    """The board seeded once per run (230 finished jobs, seconds), copied per module."""
    built = built_once(tmp_path_factory, "long-board", _seed)
    mine = tmp_path_factory.mktemp("long") / "data"
    shutil.copytree(built / "data", mine)
    service = Service.open(mine)
    yield service, json.loads((built / "ids.json").read_text())
    service.close()


def _rows(page: str) -> list[str]:
    table = page.split('id="leaderboard"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<tr data-model-id="([^"]+)" data-rank', table)


def _data(page: str) -> dict[str, Any]:
    return json.loads(page.split('id="board-data">', 1)[1].split("</script>", 1)[0])


def _api_order(service: Service, query: str = "") -> list[str]:
    board = client(service, None).get(f"{BOARD}?limit={N_MODELS}{query}").get_json()
    return [m["model_id"] for m in board["models"]]


def test_the_server_writes_one_page_and_the_script_gets_every_row(
    long_board: tuple[Service, list[str]],
) -> None:
    service, ids = long_board
    page = client(service, None).get("/tasks/sentiment").get_data(as_text=True)
    order = _api_order(service)
    assert _rows(page) == order[:PAGE_ROWS]
    units = page.split('id="units"', 1)[1].split("</table>", 1)[0]
    assert units.count("<tr data-model-id=") == PAGE_ROWS
    data = _data(page)
    assert sorted(m["model_id"] for m in data["models"]) == sorted(ids)
    assert all("page" not in m for m in data["models"])  # who may open what is apart
    assert data["openable"] == [ids[5]]  # an anonymous viewer: the published one only
    assert "Ranks 1–100 of 230 (page 1 of 3)" in page


def test_the_pages_walk_the_ranking_under_the_viewers_weights(
    long_board: tuple[Service, list[str]],
) -> None:
    service, _ = long_board
    anyone = client(service, None)
    weights = "weights=performance:1,throughput:5,memory:2,robustness:1,fairness:1"
    walked = []
    for number in (1, 2, 3):
        page = anyone.get(f"/tasks/sentiment?{weights}&page={number}").get_data(as_text=True)
        walked += _rows(page)
        if number < 3:
            assert f"page={number + 1}" in page.split('rel="next"', 1)[1].split(">", 1)[0]
        else:
            assert 'rel="next"' not in page
    assert walked == _api_order(service, "&" + weights)


@pytest.mark.parametrize(
    ("asked", "first"),
    [("0", 0), ("-1", 0), ("abc", 0), ("", 0), ("2", 100), ("3", 200), ("99", 200),
     ("1000000", 200), ("9" * 30, 200), ("\u00b2", 0), ("\u2460", 0), ("\uff13", 0),
     ("\u0663", 0), ("2.0", 0), ("+2", 0)],
)  # fmt: skip
def test_a_page_out_of_range_or_not_a_number_is_moved_into_range(
    long_board: tuple[Service, list[str]], asked: str, first: int
) -> None:
    service, _ = long_board
    response = client(service, None).get(f"/tasks/sentiment?page={asked}")
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    assert _rows(page)[0] == _api_order(service)[first]
    # moved silently before, only "page N of M" telling (outside tester): said now
    shown = str(first // 100 + 1)
    assert ('id="page-moved"' in page) is (asked != shown), asked


def test_the_viewers_links_cost_one_query_not_two_per_row(
    long_board: tuple[Service, list[str]],
) -> None:
    service, _ = long_board
    anyone = client(service, None)
    anyone.get("/tasks/sentiment")  # the prepared board is cached from here on
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(str(args[2]))

    engine = service.db.engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        assert anyone.get("/tasks/sentiment").status_code == 200
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(statements) < 25, statements  # was over 2 x 230


@pytest.mark.parametrize(
    ("total", "asked", "expected"),
    [
        (0, 1, RowPage(1, 1, 0, 0, 0)),
        (1, 1, RowPage(1, 1, 0, 1, 1)),
        (100, 2, RowPage(1, 1, 0, 100, 100)),
        (101, 2, RowPage(2, 2, 100, 101, 101)),
        (10_000, 100, RowPage(100, 100, 9_900, 10_000, 10_000)),
        (10_000, 0, RowPage(1, 100, 0, 100, 10_000)),
    ],
)
def test_row_pages(total: int, asked: int, expected: RowPage) -> None:
    assert RowPage.of(total, asked) == expected


def test_page_data_is_whole_json() -> None:
    from usecases.boards.page import PageData

    assert json.loads(PageData({"a": 1}, "[]").to_json()) == {"a": 1, "models": []}
    assert json.loads(PageData({}, '[{"b": 2}]').to_json()) == {"models": [{"b": 2}]}
