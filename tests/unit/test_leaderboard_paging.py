"""The leaderboard a page at a time, and the prepared board kept between requests: pages
put together are the whole board, and a new result is on the very next request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from api.app import create_app
from client.sdk import DynaevalClient
from tests.unit.test_leaderboard_api import URL, finished
from usecases.service import Service

AXES_OF = [  # seven models, two of them tied on every axis but performance intervals
    (60, 10, 4, 70, 80),
    (70, 6, 6, 74, 82),
    (80, 4, 10, 80, 90),
    (65, 8, 5, 72, 81),
    (75, 5, 8, 77, 85),
    (62, 9, 4.5, 71, 80.5),
    (78, 4.5, 9, 79, 88),
]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = Service.open(tmp_path / "data")
    yield svc
    svc.close()


@pytest.fixture
def client(service: Service) -> FlaskClient:
    return create_app(service).test_client()


def seven(service: Service) -> None:
    for i, axes in enumerate(AXES_OF):
        performance = axes[0]
        finished(service, f"m{i}", axes, [performance - 3, performance + 3])


def test_pages_put_together_are_the_whole_board(client: FlaskClient, service: Service) -> None:
    seven(service)
    weights = {"weights": "performance:4,throughput:1,memory:1,robustness:1,fairness:1"}
    whole = client.get(URL, query_string=weights).get_json()
    assert whole["total_models"] == 7 and whole["offset"] == 0 and len(whole["models"]) == 7
    models, flips, groups = [], [], {}
    for offset in (0, 3, 6):
        page = client.get(URL, query_string={**weights, "limit": 3, "offset": offset}).get_json()
        assert page["total_models"] == 7 and page["offset"] == offset and page["limit"] == 3
        assert len(page["models"]) == min(3, 7 - offset)
        # each page's pairs: inside it, plus the one across its lower edge (none at the end)
        assert [f["above"] for f in page["flip_weights"]] == [
            m["model_id"] for m in page["models"]
        ][: len(page["models"]) - (offset == 6)]
        models += page["models"]
        flips += page["flip_weights"]
        on_page = [m["model_id"] for m in page["models"]]
        for group in page["tie_groups"]:  # each group's members on this page, its whole range
            assert group["model_ids"] and set(group["model_ids"]) <= set(on_page)
            known = groups.setdefault(group["group"], {**group, "model_ids": []})
            assert (known["rank_range"], known["size"]) == (group["rank_range"], group["size"])
            known["model_ids"] = known["model_ids"] + group["model_ids"]
    assert models == whole["models"]
    assert flips == whole["flip_weights"]
    assert [groups[n] for n in sorted(groups)] == whole["tie_groups"]
    assert all(len(g["model_ids"]) == g["size"] for g in whole["tie_groups"])
    assert any(g["size"] > 1 for g in whole["tie_groups"])  # a group to split over pages


def test_a_page_past_the_end_is_empty_and_bad_pages_are_refused(
    client: FlaskClient, service: Service
) -> None:
    seven(service)
    past = client.get(URL, query_string={"offset": 50}).get_json()
    assert past["models"] == [] and past["flip_weights"] == [] and past["tie_groups"] == []
    assert past["total_models"] == 7
    for bad in ({"limit": 0}, {"limit": 10_001}, {"offset": -1}, {"limit": "x"}):
        answer = client.get(URL, query_string=bad)
        assert answer.status_code == 422, bad
        assert set(answer.get_json()["error"]) >= {"code", "message"}


def test_the_default_page_is_a_hundred_models(client: FlaskClient) -> None:
    board = client.get(URL).get_json()
    assert board["limit"] == 100 and board["models"] == [] and board["total_models"] == 0


def test_a_new_result_is_on_the_next_request(client: FlaskClient, service: Service) -> None:
    seven(service)
    before = client.get(URL).get_json()
    again = client.get(URL).get_json()
    assert again == before  # answered from the prepared board: the same answer
    newest = finished(service, "newest", (99, 3, 11, 90, 95), [98, 100])
    after = client.get(URL).get_json()
    assert after["total_models"] == 8
    assert after["models"][0]["model_id"] == newest


def test_the_sdk_reads_every_page(client: FlaskClient, service: Service) -> None:
    seven(service)
    whole = client.get(URL).get_json()
    pages: list[int] = []

    class Paged(DynaevalClient):
        def _call(self, method: str, path: str, **kwargs: object) -> object:
            params = dict(kwargs.get("params") or {})  # type: ignore[call-overload]
            pages.append(int(params.get("offset", 0)))
            return client.get("/api/v1" + path, query_string=params).get_json()

    board = Paged.__new__(Paged).leaderboard("sentiment", page_size=2)
    assert pages == [0, 2, 4, 6]
    assert board["models"] == whole["models"]
    assert board["flip_weights"] == whole["flip_weights"]
    assert board["tie_groups"] == whole["tie_groups"]
