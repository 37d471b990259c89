"""Per-model 95 % rank intervals: by hand, against a brute force, on a board of 10,000
models (where tie groups chain into one), and as the page words them."""

from __future__ import annotations

import numpy as np
import pytest

from api.pages.site import rank_notes
from dynascore.stability import group_by_overlap, rank_intervals


@pytest.mark.parametrize(
    ("low", "high", "best", "worst"),
    [
        ([9, 7, 5], [10, 8, 6], [1, 2, 3], [1, 2, 3]),  # apart: every rank is certain
        ([9, 7.5, 5], [10, 9.5, 6], [1, 1, 3], [2, 2, 3]),  # the top two overlap
        ([8, 6, 4, 2], [10, 8.5, 6.5, 4.5], [1, 1, 2, 3], [2, 3, 4, 4]),  # a chain
        ([5.0], [5.0], [1], [1]),
        ([3, 3], [3, 3], [1, 1], [2, 2]),  # equal points may take either rank
    ],
)
def test_rank_intervals_by_hand(
    low: list[float], high: list[float], best: list[int], worst: list[int]
) -> None:
    found = rank_intervals(np.array(low, float), np.array(high, float))
    assert found[0].tolist() == best and found[1].tolist() == worst


def test_rank_intervals_match_a_brute_force_and_hold_the_rank() -> None:
    rng = np.random.default_rng(5)
    scores = rng.normal(50, 10, 300)
    half = rng.uniform(0, 3, 300)
    low, high = scores - half, scores + half
    best, worst = rank_intervals(low, high)
    for i in range(300):
        assert best[i] == 1 + np.sum(low > high[i])
        assert worst[i] == 300 - np.sum(high < low[i])
        rank = 1 + np.sum(scores > scores[i])
        assert best[i] <= rank <= worst[i]


def test_at_ten_thousand_models_intervals_stay_narrow_where_groups_chain() -> None:
    scores = np.linspace(100, 0, 10_000)
    low, high = scores - 0.05, scores + 0.05  # each overlaps only its near neighbours
    assert np.unique(group_by_overlap(scores, low, high)).size == 1  # the chain: one group
    best, worst = rank_intervals(low, high)
    assert int(np.max(worst - best)) <= 20  # each model's own interval is a few ranks


def test_the_page_notes_uncertain_ranks_only() -> None:
    board = {
        "models": [
            {"model_id": "a", "rank": 1, "rank_interval": [1, 1]},
            {"model_id": "b", "rank": 2, "rank_interval": [2, 5]},
            {"model_id": "c", "rank": 3, "rank_interval": None},
        ]
    }
    assert rank_notes(board) == {"b": "2–5"}
