"""The leaderboard JSON's rank-stability fields (tie groups, Dynascore intervals, flip
weights) through the Flask test client, and the assembly function's contract: existing
fields unchanged, incomplete rows unranked in order, linear assembly."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from api.app import create_app
from configs.vocabulary.results import EvaluationResult
from usecases.boards.leaderboard import leaderboard, prepare_board, viewer_weights
from usecases.service import Service

URL = "/api/v1/tasks/sentiment/leaderboard"
SPEC = {"kind": "docker", "image": "registry.local/model:1", "protocol": "v1"}
AXES = ("performance", "throughput", "memory", "robustness", "fairness")


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = Service.open(tmp_path / "data")
    yield svc
    svc.close()


@pytest.fixture
def client(service: Service) -> FlaskClient:
    return create_app(service).test_client()  # the leaderboard is public


def finished(service: Service, name: str, axes: tuple[float, ...], ci: Any = None) -> str:
    """A model with a finished result: the five axes and its overall performance interval."""
    model_id, job_id = service.store.submit("sentiment", name, SPEC)
    job = service.store.claim("w", lease_s=60)
    assert job is not None and job.id == job_id
    summary = {**dict(zip(AXES, axes, strict=True)), "metric": "macro_f1", "performance_ci": ci}
    result = EvaluationResult("sentiment", "done", summary=summary, provenance={})
    assert service.store.finish(job_id, "w", result, lease=job.lease)
    return model_id


def three(service: Service) -> dict[str, str]:
    """dynascore/README.md's worked example with performance intervals (see
    tests/unit/test_dynascore_stability.py for the arithmetic): with a 16 GiB instance and
    weights 4,1,1,1,1 the Dynascores are C 86.67, B 80.67, A 76.67 and the intervals
    C [85.67, 87.67], B [78.67, 82.67], A [72.67, 80.67] -> groups {C}, {B, A}."""
    return {
        "A": finished(service, "A", (60, 10, 4, 70, 80), [52, 68]),
        "B": finished(service, "B", (70, 6, 6, 74, 82), [66, 74]),
        "C": finished(service, "C", (80, 4, 10, 80, 90), [78, 82]),
    }


def test_tie_groups_and_intervals_by_hand(client: FlaskClient, service: Service) -> None:
    ids = three(service)
    board = client.get(URL + "?instance_memory=16").get_json()
    assert [m["name"] for m in board["models"]] == ["C", "B", "A"]
    assert [m["tie_group"] for m in board["models"]] == [1, 2, 2]
    assert [m["dynascore_ci"] for m in board["models"]] == [
        pytest.approx([257 / 3, 263 / 3]),
        pytest.approx([236 / 3, 248 / 3]),
        pytest.approx([218 / 3, 242 / 3]),
    ]
    assert board["tie_confidence"] == 0.95
    assert board["tie_groups"] == [
        {"group": 1, "model_ids": [ids["C"]], "rank_range": [1, 1], "size": 1},
        {"group": 2, "model_ids": [ids["B"], ids["A"]], "rank_range": [2, 3], "size": 2},
    ]


def test_flip_weights_by_hand_and_applying_one_swaps_the_pair(
    client: FlaskClient, service: Service
) -> None:
    ids = three(service)
    board = client.get(URL + "?instance_memory=16").get_json()
    assert board["flip_weight_range"] == [0.0, 5.0]
    first, second = board["flip_weights"]
    # C over B: memory 1 -> 4.6; B over A: throughput 1 -> 3.4 (performance 4 -> 0.8 is larger)
    assert (first["above"], first["below"], first["axis"]) == (ids["C"], ids["B"], "memory")
    assert (first["weight"], first["delta"]) == (pytest.approx(4.6), pytest.approx(3.6))
    assert (second["above"], second["below"], second["axis"]) == (ids["B"], ids["A"], "throughput")
    assert (second["weight"], second["delta"]) == (pytest.approx(3.4), pytest.approx(2.4))

    def order(weights: str) -> list[str]:
        body = client.get(URL, query_string={"instance_memory": 16, "weights": weights})
        return [m["name"] for m in body.get_json()["models"]]

    assert order("memory:4.6001")[:2] == ["B", "C"]
    assert order("memory:4.5999")[:2] == ["C", "B"]
    assert order("throughput:3.4001")[1:] == ["A", "B"]


def test_no_single_weight_swaps_a_dominating_model(client: FlaskClient, service: Service) -> None:
    finished(service, "best", (90, 100, 0.5, 90, 90), [89, 91])
    finished(service, "worst", (50, 10, 1.5, 60, 60), [49, 51])
    board = client.get(URL).get_json()
    [flip] = board["flip_weights"]
    assert flip == {**flip, "axis": None, "weight": None, "delta": None}
    assert [m["tie_group"] for m in board["models"]] == [1, 2]


def test_a_model_without_an_interval_has_a_null_dynascore_ci(
    client: FlaskClient, service: Service
) -> None:
    finished(service, "a", (90, 100, 1.5, 90, 90), None)
    finished(service, "b", (60, 100, 0.1, 90, 90), [50, 70])
    models = client.get(URL).get_json()["models"]
    by_name = {m["name"]: m for m in models}
    assert by_name["a"]["dynascore_ci"] is None
    low, high = by_name["b"]["dynascore_ci"]
    assert low < by_name["b"]["dynascore"] < high


def test_empty_and_single_model_boards(client: FlaskClient, service: Service) -> None:
    board = client.get(URL).get_json()
    assert board["tie_groups"] == [] and board["flip_weights"] == []
    only = finished(service, "only", (70, 6, 0.6, 74, 82), [60, 80])
    board = client.get(URL).get_json()
    assert board["tie_groups"] == [
        {"group": 1, "model_ids": [only], "rank_range": [1, 1], "size": 1}
    ]
    assert board["flip_weights"] == []


def test_openapi_documents_the_new_fields(client: FlaskClient) -> None:
    spec = client.get("/api/v1/openapi.json").get_json()
    schemas = spec["components"]["schemas"]
    board = schemas["Leaderboard"]["properties"]
    assert {"tie_groups", "flip_weights", "flip_weight_range", "tie_confidence"} <= set(board)
    assert {"tie_group", "dynascore_ci"} <= set(schemas["LeaderboardEntry"]["properties"])
    assert set(schemas["FlipWeight"]["properties"]) == {"above", "below", "axis", "weight", "delta"}
    assert set(schemas["TieGroup"]["properties"]) == {"group", "model_ids", "rank_range", "size"}


# -- the assembly function ---------------------------------------------------------------------
def rows(n: int) -> list[dict[str, Any]]:
    return [
        {
            "model_id": f"id{i}",
            "name": f"m{i}",
            "performance": 50.0 + i % 37,
            "throughput": 10.0 + i % 11,
            "memory": 0.5 + (i % 7) / 10,
            "robustness": 60.0 + i % 13,
            "fairness": 70.0 + i % 5,
            "performance_ci": [49.0 + i % 37, 51.0 + i % 37],
            "rounds": [{"round": "r1", "performance": 50.0 + i % 37, "n": 10, "extra": 1}],
            "dataset_hashes": {"r1/test": "h"},
        }
        for i in range(n)
    ]


def test_incomplete_rows_are_unranked_in_order_and_entries_keep_their_fields(
    service: Service,
) -> None:
    task = service.tasks["sentiment"]
    given = rows(6)
    given[1]["fairness"] = None
    del given[3]["throughput"]
    given[4]["memory"] = float("nan")
    board = leaderboard(task, given, viewer_weights(task, None), current_hashes={"r1/test": "h"})
    assert [u["model_id"] for u in board["unranked"]] == ["id1", "id3", "id4"]
    assert [u["reason"] for u in board["unranked"]] == [
        "missing axes: fairness",
        "missing axes: throughput",
        "missing axes: memory",
    ]
    entry = board["models"][0]
    assert list(entry) == [
        "rank", "model_id", "name", "dynascore", "score", *AXES, "memory_peak", "ranked_as",
        "units", "rounds",
        "performance_ci", "secondary", "secondary_ci", "tie_group", "dynascore_ci",
        "rank_interval", "partial",
        "not_scored_on", "image_gone", "throughput_mode", "conditions",
    ]  # fmt: skip
    assert entry["rounds"] == [
        {"round": "r1", "performance": entry["performance"], "performance_ci": None}
    ]
    assert entry["partial"] is False and entry["not_scored_on"] == []
    assert len(board["flip_weights"]) == len(board["models"]) - 1 == 2


def test_duplicate_model_ids_are_refused(service: Service) -> None:
    task = service.tasks["sentiment"]
    given = rows(2)
    given[1]["model_id"] = "id0"
    with pytest.raises(ValueError, match="more than once"):
        leaderboard(task, given, viewer_weights(task, None))


def test_groups_partition_the_ranking_in_order(service: Service) -> None:
    task = service.tasks["sentiment"]
    board = leaderboard(task, rows(500), viewer_weights(task, "memory:3"))
    ordered = [m["model_id"] for m in board["models"]]
    assert [i for g in board["tie_groups"] for i in g["model_ids"]] == ordered
    assert [g["group"] for g in board["tie_groups"]] == list(range(1, len(board["tie_groups"]) + 1))
    for group in board["tie_groups"]:
        members = [m for m in board["models"] if m["tie_group"] == group["group"]]
        assert group["rank_range"] == [members[0]["rank"], members[-1]["rank"]]
    pairs = [(f["above"], f["below"]) for f in board["flip_weights"]]
    assert pairs == list(zip(ordered, ordered[1:], strict=False))


@pytest.mark.parametrize("bad", [None, [1.0], [70.0, 60.0], ["a", "b"], [float("nan"), 1.0], {}])
def test_an_unusable_performance_interval_counts_as_none(service: Service, bad: Any) -> None:
    task = service.tasks["sentiment"]
    given = rows(3)
    given[1]["performance_ci"] = bad
    board = leaderboard(task, given, viewer_weights(task, None))
    by_id = {m["model_id"]: m for m in board["models"]}
    assert by_id["id1"]["dynascore_ci"] is None
    assert by_id["id1"]["performance_ci"] is bad  # shown as stored
    assert by_id["id0"]["dynascore_ci"] is not None


def test_a_prepared_board_renders_like_the_function_and_is_not_changed_by_rendering(
    service: Service,
) -> None:
    task = service.tasks["sentiment"]
    given = rows(50)
    prepared = prepare_board(task, given, None, {"r1/test": "h"})
    before = [dict(entry) for entry in prepared.entries]
    for text in ("memory:3", "performance:0", None):
        weights = viewer_weights(task, text)
        expected = leaderboard(task, given, weights, current_hashes={"r1/test": "h"})
        assert prepared.render(weights) == expected
    assert [dict(entry) for entry in prepared.entries] == before


@pytest.mark.parametrize("weights", [None, "performance:4,fairness:3"])
def test_an_axis_the_task_never_measures_is_left_out_not_a_reason_to_unrank(
    service: Service, weights: str | None
) -> None:
    """VQA lists no fairness perturbation: its models have no fairness score, and its board
    ranks them all on the other axes (fairness shown as not measured, never as 0), even
    when a viewer weighs fairness."""
    task = replace(service.tasks["sentiment"], fairness=())
    assert task.unmeasured_axes == ("fairness",)
    given = rows(4)
    for row in given:
        row["fairness"] = None
    board = leaderboard(task, given, viewer_weights(task, weights), current_hashes=None)
    assert board["unranked"] == []
    assert {m["model_id"] for m in board["models"]} == {"id0", "id1", "id2", "id3"}
    assert all(m["fairness"] is None and m["units"]["fairness"] is None for m in board["models"])
    without = leaderboard(
        task,
        [{**row, "fairness": 0.0} for row in given],
        viewer_weights(task, weights.replace(",fairness:3", "") if weights else None),
        current_hashes=None,
    )
    assert [m["dynascore"] for m in board["models"]] == [m["dynascore"] for m in without["models"]]
