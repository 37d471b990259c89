"""Measurement resolution: differences a board cannot tell from noise count as none, so
noise neither earns points nor sets an exchange rate; Dynaboard's published table is
untouched (no resolution there), and the board's readable 0-100 score."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from configs.vocabulary.axes import AXES
from dynascore.dynascore import compute
from dynascore.resolution import (
    MEMORY_FLOOR_GIB,
    THROUGHPUT_FLOOR,
    Resolution,
    board_resolutions,
    coarsen,
)
from dynascore.weights import Weights
from evaluator.tasks import load_tasks
from usecases.boards.leaderboard import board_scores, leaderboard, viewer_weights

MIB = 1 / 1024


@pytest.mark.parametrize(
    ("values", "resolution", "expected"),
    [
        ([3.0, 1.0, 2.0], Resolution(0.0), [3.0, 1.0, 2.0]),  # none: kept
        ([1.0, 1.2, 5.0], Resolution(0.5), [1.1, 1.1, 5.0]),  # a group takes its median
        ([1.8, 0.9, 0.0], Resolution(1.0), [1.35, 1.35, 0.0]),  # no chain past one resolution
        ([0.0, 0.9, 1.8, 2.7], Resolution(1.0), [0.45, 0.45, 2.25, 2.25]),
        ([100.0, 99.0, 97.0], Resolution(0.02, relative=True), [99.5, 99.5, 97.0]),
        ([5.0], Resolution(10.0), [5.0]),
        ([2.0, 2.0, 2.0], Resolution(0.1), [2.0, 2.0, 2.0]),
    ],
)
def test_coarsen_groups_from_the_best_value_down(
    values: list[float], resolution: Resolution, expected: list[float]
) -> None:
    assert coarsen(values, resolution).tolist() == pytest.approx(expected)


def test_a_group_never_spans_more_than_one_resolution() -> None:
    values = np.random.default_rng(7).uniform(0, 10, 200)
    coarse = coarsen(values, Resolution(0.5))
    for value in np.unique(coarse):
        members = values[coarse == value]
        assert members.max() - members.min() <= 0.5 + 1e-12
    assert np.all(np.abs(coarse - values) <= 0.5 + 1e-12)


def test_board_resolution_takes_the_spread_with_a_floor() -> None:
    floor = board_resolutions([None, None])
    assert floor["throughput"] == Resolution(THROUGHPUT_FLOOR, relative=True)
    assert floor["memory"] == Resolution(MEMORY_FLOOR_GIB)
    assert floor["performance"].amount == floor["robustness"].amount == 0.0
    noisy = board_resolutions([0.05, 0.07, None, 0.09])
    assert noisy["throughput"] == Resolution(0.07, relative=True)  # the median spread


def test_board_score_is_zero_to_one_hundred() -> None:
    assert board_scores(np.array([10.0, 30.0, 20.0])).tolist() == [0.0, 100.0, 50.0]
    assert board_scores(np.array([7.0, 7.0])).tolist() == [100.0, 100.0]


def _row(model_id: str, performance: float, throughput: float, memory: float) -> dict[str, Any]:
    return {
        "model_id": model_id,
        "name": model_id,
        "performance": performance,
        "throughput": throughput,
        "memory": memory,
        "robustness": 90.0,
        "fairness": 95.0,
        "rounds": [],
    }


def _noisy_board() -> list[dict[str, Any]]:
    """The issue's sentiment board in kind: models whose memory differs by fractions of a
    megabyte and throughput by fractions of a percent, the best (lexicon, F1 59.4) a shade
    bigger, and four copies of one image."""
    base = 0.04
    rows = [_row("majority", 16.7, 3000.0, base), _row("lexicon", 59.4, 3030.0, base + 0.5 * MIB)]
    rows += [
        _row(f"other{i}", 20.0 + 5 * i, 3000.0 * (1 + 0.003 * i), base + 0.01 * i * MIB)
        for i in range(6)
    ]
    rows += [
        _row(f"copy{i}", 40.0, 2000.0 * (1 - 0.002 * i), base + 0.02 * i * MIB) for i in range(4)
    ]
    return rows


def test_noise_no_longer_decides_the_default_ranking() -> None:
    task = load_tasks()["sentiment"]
    rows = _noisy_board()
    # Dynaboard's formula without a resolution (how published tables are reproduced): the
    # half megabyte's exchange rate is so small that the best model ranks third, and the
    # four copies are ordered by their noise
    table = pd.DataFrame(
        [{a: r[a] for a in AXES} for r in rows], index=[r["model_id"] for r in rows]
    )
    raw = compute(table, Weights(dict(task.weights)), instance_memory_gib=task.instance_memory_gib)
    assert raw.index[0] != "lexicon"
    assert raw.loc[[f"copy{i}" for i in range(4)], "rank"].nunique() == 4

    board = leaderboard(task, rows, viewer_weights(task, None))
    ranked = [m["model_id"] for m in board["models"]]
    assert ranked[0] == "lexicon" and ranked[-1] == "majority"
    copies = [m for m in board["models"] if m["model_id"].startswith("copy")]
    assert len({m["rank"] for m in copies}) == 1 and len({m["dynascore"] for m in copies}) == 1
    assert board["amrs"]["memory"] == 0.0  # constant within its resolution: left out
    assert board["models"][0]["score"] == 100.0 and board["models"][-1]["score"] == 0.0
    assert board["resolution"]["memory"] == {"amount": MEMORY_FLOOR_GIB, "relative": False}


def test_differences_beyond_the_resolution_still_count() -> None:
    task = load_tasks()["sentiment"]
    rows = [
        _row("small", 50.0, 1000.0, 0.5),
        _row("big", 60.0, 1000.0, 2.5),
        _row("mid", 55.0, 1000.0, 1.5),
    ]
    board = leaderboard(task, rows, viewer_weights(task, "performance:0,memory:1"))
    assert [m["model_id"] for m in board["models"]] == ["small", "mid", "big"]
    assert board["models"][0]["ranked_as"]["memory"] == pytest.approx(0.5)
