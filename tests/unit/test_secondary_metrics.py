"""Metrics reported beside a task's own (BLEU beside chrF++) reach every surface with one
number: the stored summary and round rows, the leaderboard API under any round weights,
and the page (served and re-ranked by its script)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from configs.vocabulary.results import ORIGINAL, Score, ScoreKey
from evaluator.scoring.rollup import summarise
from evaluator.tasks import load_tasks
from usecases.boards.assemble import reweighted
from usecases.boards.leaderboard import leaderboard, viewer_weights

TASK = load_tasks()["translation"]


def score(rnd: str, metric: str, value: float, ci: tuple[float, float] | None = None,
          **key: Any) -> Score:  # fmt: skip
    base = ScoreKey("translation", rnd, "test", "h", variant=ORIGINAL, metric=metric)
    low, high = ci or (None, None)
    return Score(replace(base, **key), value, 84, low, high)


SCORES = [
    score("r1", "chrf", 60.0, (55.0, 65.0)),
    score("r1", "bleu", 30.0, (25.0, 35.0)),
    score("r2", "chrf", 40.0, (35.0, 45.0)),
    score("r2", "bleu", 10.0, (6.0, 14.0)),
    score("r2", "bleu", 99.0, variant="typo"),  # perturbed: not the round's
    score("r2", "bleu", 99.0, slice="direction=en-de"),  # a slice: not the round's
]


def test_rounds_and_summary_carry_bleu_with_intervals() -> None:
    rng = np.random.default_rng(0)
    reps = {("r1", "test"): rng.normal(30, 2, 1000), ("r2", "test"): rng.normal(10, 2, 1000)}
    summary, rounds = summarise(TASK, SCORES, {}, None, {"bleu": reps})
    assert [r["secondary"] for r in rounds] == [{"bleu": 30.0}, {"bleu": 10.0}]
    assert [r["secondary_ci"] for r in rounds] == [{"bleu": [25.0, 35.0]}, {"bleu": [6.0, 14.0]}]
    assert summary["secondary"] == {"bleu": 20.0}
    low, high = summary["secondary_ci"]["bleu"]
    assert low < 20.0 < high
    without, _ = summarise(TASK, SCORES, {}, None, None)
    assert without["secondary_ci"] == {"bleu": None}  # no replicates: no made-up interval


def test_label_tasks_store_nothing_new() -> None:
    sentiment = load_tasks()["sentiment"]
    summary, rounds = summarise(sentiment, [], {}, None, None)
    assert "secondary" not in summary and all("secondary" not in r for r in rounds)


def row(model_id: str, bleu: tuple[float, float], chrf: tuple[float, float]) -> dict[str, Any]:
    scores = [
        score("r1", "chrf", chrf[0]), score("r1", "bleu", bleu[0]),
        score("r2", "chrf", chrf[1]), score("r2", "bleu", bleu[1]),
    ]  # fmt: skip
    summary, rounds = summarise(TASK, scores, {}, None, None)
    rounds = [{**r, "robustness": 90.0, "fairness": 90.0} for r in rounds]
    return {
        "model_id": model_id,
        "name": model_id,
        **summary,
        "throughput": 100.0 + len(model_id),
        "memory": 0.1,
        "robustness": 90.0,
        "fairness": 90.0,
        "rounds": rounds,
    }


def test_the_board_gives_bleu_under_every_round_weighting() -> None:
    rows = [row("a", (30.0, 10.0), (60.0, 40.0)), row("bb", (20.0, 18.0), (50.0, 48.0))]
    board = leaderboard(TASK, rows, viewer_weights(TASK, None), current_hashes=None)
    by_id = {m["model_id"]: m for m in board["models"]}
    assert by_id["a"]["secondary"] == {"bleu": 20.0}
    tilted = reweighted(rows, {"r1": 3.0, "r2": 1.0}, TASK)
    board = leaderboard(TASK, tilted, viewer_weights(TASK, None), current_hashes=None)
    by_id = {m["model_id"]: m for m in board["models"]}
    assert by_id["a"]["secondary"]["bleu"] == pytest.approx(25.0)
    assert by_id["bb"]["secondary"]["bleu"] == pytest.approx(19.5)
    assert by_id["a"]["secondary_ci"] == {"bleu": None}  # rolled up under other weights


def test_the_page_shows_bleu_beside_chrf(tmp_path: Path) -> None:
    from api.app import create_app
    from tests.unit.test_api import AXES_A, finished
    from usecases.service import Service

    service = Service.open(tmp_path / "data")
    try:
        finished(service, "t", AXES_A, task="translation")
        client = create_app(service).test_client()
        html = client.get("/tasks/translation").get_data(as_text=True)
        assert 'data-sort="secondary:bleu"' in html and "beside chrF++" in html
        api = client.get("/api/v1/tasks/translation/leaderboard").get_json()
        assert "secondary" in api["models"][0]
    finally:
        service.close()


def test_the_csv_download_and_the_model_page_carry_bleu(tmp_path: Path) -> None:
    """Found by an outside trial: the download and the model page had chrF++ alone."""
    import csv
    import io

    from api.app import create_app
    from configs.vocabulary.results import EvaluationResult
    from tests.unit.auth_helpers import issue_token, signed_in
    from tests.unit.test_api import DOCKER
    from usecases.service import Service

    service = Service.open(tmp_path / "data")
    try:
        given = row("a", (30.0, 10.0), (60.0, 40.0))
        summary = {k: v for k, v in given.items() if k not in ("model_id", "name", "rounds")}
        summary["secondary_ci"] = {"bleu": [15.0, 25.0]}
        model_id, job_id = service.store.submit("translation", "a", DOCKER)
        claimed = service.store.claim("w", 60)
        assert claimed is not None
        result = EvaluationResult("translation", "done", summary=summary, rounds=given["rounds"])
        assert service.store.finish(job_id, "w", result, lease=claimed.lease)
        client = signed_in(create_app(service).test_client(), issue_token(service))
        text = client.get("/api/v1/tasks/translation/leaderboard/download?format=csv").get_data(
            as_text=True
        )
        (first,) = list(csv.DictReader(io.StringIO(text)))
        assert (first["bleu"], first["bleu_ci_low"], first["bleu_ci_high"]) == (
            "20.0",
            "15.0",
            "25.0",
        )
        page = client.get(f"/models/{model_id}").get_data(as_text=True)
        assert 'BLEU <span class="sub">(beside chrF++)</span>' in page
        assert "20.0" in page
    finally:
        service.close()
