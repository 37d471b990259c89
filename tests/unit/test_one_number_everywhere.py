"""One right number on every surface: for random axis and round weights, the JSON
leaderboard, the page (without script), the CSV and JSON downloads, a saved view's page, a
snapshot, the SDK over HTTP and ``dynaeval leaderboard`` give the same order, ranks,
Dynascores and readable scores."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import random
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from werkzeug.serving import make_server

from api.app import create_app
from client.cli import main as cli_main
from client.sdk import DynaevalClient
from configs.vocabulary.results import EvaluationResult
from tests.unit.auth_helpers import issue_token, signed_in
from usecases.service import Service

pytestmark = pytest.mark.slow
TASK = "sentiment"
AXES = ("performance", "throughput", "memory", "robustness", "fairness")
SPEC = {"kind": "docker", "image": "registry.local/model:1", "protocol": "v1"}
Ranked = list[tuple[str, int, float, float | None]]  # model id, rank, Dynascore, score


def _finish(service: Service, name: str, rng: random.Random) -> None:
    """A model with per-round results, so round weights move its axes."""
    model_id, job_id = service.store.submit(TASK, name, SPEC)
    job = service.store.claim("w", lease_s=60)
    assert job is not None and job.id == job_id
    rounds = [
        {
            "round": spec.name,
            "performance": rng.uniform(30, 90),
            "robustness": rng.uniform(60, 100),
            "fairness": rng.uniform(80, 100),
            "performance_ci": None,
            "weight": 1.0,
        }
        for spec in service.tasks[TASK].rounds
    ]
    summary: dict[str, Any] = {
        axis: sum(r[axis] for r in rounds) / len(rounds)
        for axis in ("performance", "robustness", "fairness")
    }
    summary |= {
        "throughput": rng.choice([1000.0, 1005.0, rng.uniform(200, 5000)]),  # some within 2 %
        "memory": rng.choice([0.5, 0.5 + 2**-12, rng.uniform(0.1, 2.0)]),  # some within 16 MiB
        "metric": "macro_f1",
        "throughput_spread": rng.choice([None, 0.01, 0.05]),
    }
    result = EvaluationResult(TASK, "done", summary=summary, rounds=rounds, provenance={})
    assert service.store.finish(job_id, "w", result, lease=job.lease)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, str, str, Path]]:
    data = tmp_path_factory.mktemp("one-number") / "data"
    service = Service.open(data)
    rng = random.Random(2026)
    for i in range(9):
        _finish(service, f"model-{i}", rng)
    token = issue_token(service, "viewer", "researcher")
    server = make_server("127.0.0.1", 0, create_app(service), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield service, f"http://127.0.0.1:{server.server_port}", token, data
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
        service.close()


def _draws(count: int) -> Iterator[tuple[dict[str, float], dict[str, float]]]:
    rng = random.Random(25)
    choices = [0.0, 0.5, 1.0, 2.37, 5.0]
    for _ in range(count):
        axes = {a: rng.choice([*choices, round(rng.uniform(0, 5), 3)]) for a in AXES}
        axes["performance"] = axes["performance"] or 1.0  # a board needs performance weighted
        rounds = {
            r: rng.choice([*choices, round(rng.uniform(0, 5), 3)]) for r in ("r1", "r2", "r3")
        }
        rounds["r1"] = rounds["r1"] or 0.5
        yield axes, rounds


def _text(weights: dict[str, float]) -> str:
    return ",".join(f"{k}:{v!r}" for k, v in weights.items())


def _from_json(board: dict[str, Any]) -> Ranked:
    return [(m["model_id"], m["rank"], m["dynascore"], m["score"]) for m in board["models"]]


_ROW = re.compile(
    r'<tr data-model-id="([^"]+)" data-rank="(\d+)" data-dynascore="([^"]+)">\s*'
    r'<td class="n rank">.*?</td>\s*<th scope="row">.*?</th>\s*<td class="n score">([^<]*)</td>',
    re.S,
)


def _from_page(html: str) -> Ranked:
    table = html.split('<table id="leaderboard"', 1)[1].split("</table>", 1)[0]
    return [(i, int(r), float(d), float(s)) for i, r, d, s in _ROW.findall(table)]


def _from_csv(text: str) -> Ranked:
    rows = [r for r in csv.DictReader(io.StringIO(text)) if r["rank"]]
    return [(r["model_id"], int(r["rank"]), float(r["dynascore"]), float(r["score"])) for r in rows]


def _same(reference: Ranked, other: Ranked, surface: str, score_digits: float = 1e-5) -> None:
    assert [r[:2] for r in other] == [r[:2] for r in reference], surface
    for (_, _, d, s), (_, _, d2, s2) in zip(reference, other, strict=True):
        assert d2 == pytest.approx(d, rel=1e-9, abs=1e-5), surface
        assert s2 == pytest.approx(s, abs=score_digits), surface


def _cli_board(data: Path, args: list[str], monkeypatch: pytest.MonkeyPatch) -> Ranked:
    monkeypatch.setenv("DYNAEVAL_DATA_DIR", str(data))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["leaderboard", TASK, "--json", *args]) == 0
    return _from_json(json.loads(out.getvalue()))


def test_every_surface_gives_the_same_ranking_for_random_weights(
    world: tuple[Service, str, str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    service, url, token, data = world
    client: FlaskClient = signed_in(create_app(service).test_client(), token)
    sdk = DynaevalClient(url, api_key=token)
    for axes, rounds in _draws(6):
        query = f"weights={_text(axes)}&rounds={_text(rounds)}"
        api = client.get(f"/api/v1/tasks/{TASK}/leaderboard?{query}&limit=1000")
        assert api.status_code == 200, api.get_json()
        reference = _from_json(api.get_json())
        assert len(reference) == 9, query

        page = client.get(f"/tasks/{TASK}?{query}")
        _same(reference, _from_page(page.get_data(as_text=True)), f"page {query}", 0.051)
        base = f"/api/v1/tasks/{TASK}/leaderboard/download?{query}"
        _same(reference, _from_csv(client.get(base + "&format=csv").get_data(as_text=True)), "csv")
        _same(reference, _from_json(client.get(base + "&format=json").get_json()), "json file")

        body = {"weights": axes, "round_weights": rounds}
        snapshot = client.post(f"/api/v1/tasks/{TASK}/snapshots", json=body).get_json()
        _same(reference, _from_json(snapshot["leaderboard"]), f"snapshot {query}")
        again = client.get(f"/api/v1/snapshots/{snapshot['id']}").get_json()
        _same(reference, _from_json(again["leaderboard"]), "snapshot read back")

        name = f"view {len(reference)} {_text(axes)}"[:60]
        view = client.post(f"/api/v1/tasks/{TASK}/views", json={"name": name, **body})
        assert view.status_code == 201, view.get_json()
        shown = client.get(view.get_json()["url"]).get_data(as_text=True)
        _same(reference, _from_page(shown), f"view page {query}", 0.051)

        _same(
            reference, _from_json(sdk.leaderboard(TASK, _text(axes), rounds=_text(rounds))), "sdk"
        )
        cli_args = ["--weights", _text(axes), "--rounds", _text(rounds)]
        _same(reference, _cli_board(data, cli_args, monkeypatch), f"cli {query}")
        remote = _cli_board(data, [*cli_args, "--server", url], monkeypatch)
        _same(reference, remote, "cli --server")


def test_a_view_name_is_unique_per_draw() -> None:
    names = {f"{_text(a)}|{_text(r)}" for a, r in _draws(6)}
    assert len(names) == 6
