"""What outside trials found in the board's requests: proportional round weights keep the
intervals, other round weights say the intervals are unknown instead of certain, huge or
oddly written weights are refused alike on the JSON, the download and the page, and the
page does not round the score twice."""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Iterator

import pytest
from flask.testing import FlaskClient

from api.app import create_app
from configs.vocabulary.results import EvaluationResult
from usecases.service import Service

TASK = "sentiment"
SPEC = {"kind": "docker", "image": "registry.local/model:1", "protocol": "v1"}
BOARD = f"/api/v1/tasks/{TASK}/leaderboard"


def _finish(service: Service, name: str, performance: float, memory: float) -> None:
    model_id, job_id = service.store.submit(TASK, name, SPEC)
    job = service.store.claim("w", lease_s=60)
    assert job is not None and job.id == job_id
    rounds = [
        {"round": r.name, "performance": performance, "robustness": 80.0, "fairness": 90.0,
         "performance_ci": [performance - 3, performance + 3], "weight": 1.0}
        for r in service.tasks[TASK].rounds
    ]  # fmt: skip
    summary = {
        "performance": performance, "robustness": 80.0, "fairness": 90.0, "throughput": 1000.0,
        "memory": memory, "metric": "macro_f1",
        "performance_ci": [performance - 3, performance + 3],
    }  # fmt: skip
    result = EvaluationResult(TASK, "done", summary=summary, rounds=rounds, provenance={})
    assert service.store.finish(job_id, "w", result, lease=job.lease)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FlaskClient]:
    service = Service.open(tmp_path_factory.mktemp("requests") / "data")
    for i, (performance, memory) in enumerate([(70, 1.0), (68, 0.5), (50, 0.2), (69, 1.5)]):
        _finish(service, f"m{i}", performance, memory)
    try:
        yield create_app(service).test_client()
    finally:
        service.close()


def test_proportional_round_weights_keep_the_intervals(client: FlaskClient) -> None:
    default = client.get(BOARD).get_json()["models"]
    doubled = client.get(BOARD + "?rounds=r1:2,r2:2,r3:2").get_json()["models"]
    assert [m["dynascore"] for m in doubled] == pytest.approx([m["dynascore"] for m in default])
    assert [m["dynascore_ci"] for m in doubled] == [m["dynascore_ci"] for m in default]
    assert [m["rank_interval"] for m in doubled] == [m["rank_interval"] for m in default]
    assert any(m["rank_interval"][0] != m["rank_interval"][1] for m in default)


def test_other_round_weights_leave_the_intervals_unknown_not_certain(client: FlaskClient) -> None:
    models = client.get(BOARD + "?rounds=r1:3,r2:1,r3:0").get_json()["models"]
    assert all(m["dynascore_ci"] is None and m["rank_interval"] is None for m in models)


@pytest.mark.parametrize(
    "query",
    ["rounds=r1:1e307", "rounds=r1:4_0", "weights=performance:4_0", "weights=performance:%2B4",
     "weights=performance:1e308", "rounds=r1:%094",
     # a page read "1,," and "," as the API refused them (outside tester)
     "weights=performance:1,,", "weights=,", "weights=Performance:1", "rounds=r1:1,,"],
)  # fmt: skip
def test_oddly_written_weights_are_refused_alike_everywhere(
    client: FlaskClient, query: str
) -> None:
    assert client.get(f"{BOARD}?{query}").status_code == 400
    assert client.get(f"{BOARD}/download?format=csv&{query}").status_code == 400
    assert client.get(f"/tasks/{TASK}?{query}").status_code == 400


def test_a_bad_weight_is_named_in_the_message_on_every_surface(client: FlaskClient) -> None:
    """The API answered one generic sentence for every bad weight, and "must be a number"
    for 1e308, which is one (outside tester)."""
    for query, words in (
        ("weights=performance:1e308", ["'performance'", "two-digit exponent", "'1e308'"]),
        ("weights=memory:-1", ["'memory'", ">= 0"]),
        ("weights=performance:1,,", ["missing between commas"]),
        ("rounds=r1:1e999", ["round 'r1'", "two-digit exponent"]),
    ):
        api = client.get(f"{BOARD}?{query}").get_json()["error"]["message"]
        page = client.get(f"/tasks/{TASK}?{query}").get_data(as_text=True)
        for word in words:
            assert word in api, (query, api)
            assert word in html.unescape(page), (query, word)


def test_huge_but_written_round_weights_do_not_overflow(client: FlaskClient) -> None:
    board = client.get(BOARD + "?rounds=r1:1e99,r2:1e99,r3:1e99").get_json()
    assert len(board["models"]) == 4 and board["unranked"] == []


def test_the_page_rounds_the_score_once(client: FlaskClient) -> None:
    models = client.get(BOARD).get_json()["models"]
    page = client.get(f"/tasks/{TASK}").get_data(as_text=True)
    for m in models:
        assert f'<td class="n score">{m["score"]:.1f}</td>' in page  # from the exact score


def test_the_csv_has_the_rank_interval_and_rows_of_one_width() -> None:
    from api.pages.downloads import leaderboard_csv

    entry = {
        "rank": 2, "rank_interval": [1, 3], "model_id": "m", "name": "n", "score": 50.0,
        "dynascore": 1.0, "performance": 1.0, "throughput": 1.0, "memory": 1.0,
        "robustness": 1.0, "fairness": 1.0, "performance_ci": None, "memory_peak": None,
        "units": {}, "rounds": [], "partial": False, "not_scored_on": [],
    }  # fmt: skip
    board = {
        "rounds": ["r1", "r2"], "dynascore_defined": True, "models": [entry],
        "unranked": [{"model_id": "u", "name": "un", "reason": "missing axes: fairness"}],
    }  # fmt: skip
    rows = list(csv.reader(io.StringIO(leaderboard_csv(board))))
    assert len({len(row) for row in rows}) == 1, [len(row) for row in rows]
    header = rows[0]
    assert rows[1][header.index("rank_low")] == "1" and rows[1][header.index("rank_high")] == "3"
    assert rows[2][header.index("model_id")] == "u" and rows[2][-1] == "missing axes: fairness"


def test_the_sliders_labels_say_the_weights_the_ranking_uses(client: FlaskClient) -> None:
    """0.25 was labelled "0.2" though 0.25 ranked the board (outside tester)."""
    page = client.get(f"/tasks/{TASK}?weights=performance:6,memory:0.25").get_data(as_text=True)
    assert '<output for="w_memory" id="w_memory_value">0.25</output>' in page
    assert '<output for="w_performance" id="w_performance_value">6.0</output>' in page
