"""A round weight the owner sets reaches every board at once: the JSON leaderboard, its
page, the download, whatever weights the stored results were computed with. The JSON
leaderboard takes ``?rounds=`` as the page and the download do."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from configs.vocabulary.clock import ManualClock
from configs.vocabulary.results import EvaluationResult, Score, ScoreKey
from store.accounts import Accounts
from tests.unit.test_api import assert_error
from tests.unit.test_rounds_api import FAKE, ROUNDS, client, rows, upload
from tests.unit.test_task_catalog import small_config
from usecases.service import Service

BOARD = "/api/v1/tasks/sentiment/leaderboard"
# per round (r1, r2): A is strong on r1, B on r2; equal weights put A first (50 vs 45)
PERFORMANCE = {"A": (80.0, 20.0), "B": (30.0, 60.0)}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = Service.open(
        tmp_path / "data", config_dir=small_config(tmp_path / "configs"), clock=ManualClock()
    )
    owner = client(svc)  # carol, who owns the task from here on
    Accounts(svc.db, svc.clock).set_task_access("sentiment", "carol", private=False)
    assert upload(owner, ROUNDS, rows(5), name="r2").status_code == 201
    for name, (r1, r2) in PERFORMANCE.items():
        _scored(svc, name, r1, r2)
    yield svc
    svc.close()


def _scored(service: Service, name: str, r1: float, r2: float) -> None:
    """A result computed under the round weights of its day (equal: 1 and 1)."""
    _, job_id = service.store.submit("sentiment", name, FAKE)
    claimed = service.store.claim("seed-worker", 60)
    assert claimed is not None and claimed.id == job_id
    hashes = dict(service.dataset_hashes("sentiment"))
    mean = (r1 + r2) / 2
    axes = {"performance": mean, "throughput": 100.0, "memory": 1.0, "robustness": 90.0,
            "fairness": 90.0, "performance_ci": [mean - 1, mean + 1]}  # fmt: skip
    per_round = [
        {"round": name_, "performance": value, "performance_ci": [value - 1, value + 1],
         "robustness": 90.0, "fairness": 90.0}
        for name_, value in (("r1", r1), ("r2", r2))
    ]  # fmt: skip
    result = EvaluationResult(
        task="sentiment",
        status="done",
        summary={**axes, "metric": "macro_f1"},
        rounds=per_round,
        scores=[Score(ScoreKey("sentiment", "r1", "test", hashes["r1/test"]), r1, 20)],
        provenance={"code_version": "test", "dataset_hashes": hashes},
    )
    assert service.store.finish(job_id, "seed-worker", result, lease=claimed.lease)


def _performance(body: dict[str, Any]) -> dict[str, float]:
    return {m["name"]: m["performance"] for m in body["models"]}


def _order(body: dict[str, Any]) -> list[str]:
    return [m["name"] for m in body["models"]]


def _csv_performance(anyone: FlaskClient, query: str = "") -> dict[str, float]:
    text = anyone.get(f"{BOARD}/download?format=csv{query}").get_data(as_text=True)
    return {r["name"]: float(r["performance"]) for r in csv.DictReader(io.StringIO(text))}


def test_a_round_weight_set_by_the_owner_reaches_every_board(service: Service) -> None:
    anyone = client(service, None)
    before = anyone.get(BOARD).get_json()
    assert _performance(before) == {"A": 50.0, "B": 45.0} and _order(before) == ["A", "B"]
    changed = client(service).patch(f"{ROUNDS}/r2", json={"weight": 3})
    assert changed.status_code == 200
    after = anyone.get(BOARD).get_json()
    # A: (80 + 3·20) / 4 = 35, B: (30 + 3·60) / 4 = 52.5: the stored equal-weight means go
    assert _performance(after) == {"A": 35.0, "B": 52.5}
    assert _order(after) == ["B", "A"]
    assert all(m["performance_ci"] is None for m in after["models"])  # not for these weights
    assert _csv_performance(anyone) == {"A": 35.0, "B": 52.5}
    page = anyone.get("/tasks/sentiment").get_data(as_text=True)
    assert page.index(">B<") < page.index(">A<")
    # the page's script re-ranks from this data, and leaves it as is under the task's weights
    data = json.loads(page.split('id="board-data"', 1)[1].split(">", 1)[1].split("</script>")[0])
    assert {m["name"]: m["performance"] for m in data["models"]} == {"A": 35.0, "B": 52.5}


def test_the_json_leaderboard_takes_round_weights_as_the_page_does(service: Service) -> None:
    anyone = client(service, None)
    only_r1 = anyone.get(f"{BOARD}?rounds=r2:0").get_json()
    assert _performance(only_r1) == {"A": 80.0, "B": 30.0}
    assert _csv_performance(anyone, "&rounds=r2:0") == {"A": 80.0, "B": 30.0}
    unchanged = anyone.get(f"{BOARD}?rounds=r1:1,r2:1").get_json()
    assert _performance(unchanged) == {"A": 50.0, "B": 45.0}
    kept = {m["name"]: m["performance_ci"] for m in unchanged["models"]}
    assert kept == {"A": [49.0, 51.0], "B": [44.0, 46.0]}  # computed under these weights
    assert_error(anyone.get(f"{BOARD}?rounds=nope:1"), 400, "bad_weights")
    assert_error(anyone.get(f"{BOARD}?rounds=r1:0,r2:0"), 400, "bad_weights")


def test_the_rounds_listing_names_the_identity_results_use(service: Service) -> None:
    """The listing's sha256 is the file's; results name a set by dataset_hash: both shown."""
    listing = client(service).get(ROUNDS).get_json()
    shown = {f"{r['name']}/{d['name']}": d for r in listing["rounds"] for d in r["datasets"]}
    provenance = service.queries.leaderboard_rows("sentiment")[0]["dataset_hashes"]
    assert {key: d["dataset_hash"] for key, d in shown.items()} == provenance
    assert all(d["sha256"] and d["sha256"] != d["dataset_hash"] for d in shown.values())
