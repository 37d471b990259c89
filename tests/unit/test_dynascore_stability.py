"""Rank stability: tie groups at 95 % and one-axis flip weights, against hand-computed
tables (the arithmetic is in the comments) and properties on random leaderboards."""

import numpy as np
import pandas as pd
import pytest

from dynascore import AXES, Weights, compute
from dynascore.stability import flip_points, flip_weights, group_by_overlap, tie_groups


def table(rows: dict[str, tuple[float, ...]]) -> pd.DataFrame:
    """Models -> (performance, throughput, memory, robustness, fairness)."""
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(AXES))


# dynascore/README.md's worked example (16 GiB instance, default weights 4,1,1,1,1):
#   units (u / AMRS)   performance  throughput  memory  robustness  fairness   Dynascore
#   C                   80          4/.3=13.33  6/.3=20    160       180       260/3 = 86.67
#   B                   70          6/.3=20    10/.3=33.33 148       164       242/3 = 80.67
#   A                   60         10/.3=33.33 12/.3=40    140       160       230/3 = 76.67
THREE = table({"A": (60, 10, 4, 70, 80), "B": (70, 6, 6, 74, 82), "C": (80, 4, 10, 80, 90)})


def ci(**bounds: tuple[float, float]) -> pd.DataFrame:
    return pd.DataFrame.from_dict(bounds, orient="index", columns=["low", "high"])


# -- tie groups --------------------------------------------------------------------------------
def test_groups_are_cut_only_where_everything_above_clears_everything_below():
    # position  score  interval       min(low) so far  max(high) from here   cut after?
    #   P        90    [88, 92]             88               92               88 > 86.5 yes
    #   Q        85    [84, 86]             84               86.5             84 > 86.5 no
    #   R        83    [80, 86.5]           80               86.5             80 > 81   no
    #   S        79    [78.5, 79.5]         78.5             81               78.5 > 81 no
    #   T        75    [70, 81]             70               81
    # R and S do not overlap, but T (below S) overlaps R: the order R > S > T is not
    # established as a whole, so Q..T are one group.
    scores = np.array([90, 85, 83, 79, 75.0])
    low = np.array([88, 84, 80, 78.5, 70.0])
    high = np.array([92, 86, 86.5, 79.5, 81.0])
    assert group_by_overlap(scores, low, high).tolist() == [1, 2, 2, 2, 2]
    # Without T, S is separated from everything above it (min low 80 > S's high 79.5).
    assert group_by_overlap(scores[:4], low[:4], high[:4]).tolist() == [1, 2, 2, 3]


def test_touching_intervals_tie_and_points_tie_only_when_equal():
    # Closed intervals: Q's upper end 88 meets P's lower end 88 -> overlap.
    assert group_by_overlap(np.array([90, 86.0]), np.array([88, 84.0]), np.array([92, 88.0])).tolist() == [1, 1]  # fmt: skip
    points = np.array([3.0, 2.0, 2.0, 1.0])
    assert group_by_overlap(points, points, points).tolist() == [1, 2, 2, 3]
    assert group_by_overlap(np.zeros(0), np.zeros(0), np.zeros(0)).tolist() == []


def test_intervals_that_do_not_hold_their_score_are_refused():
    with pytest.raises(ValueError, match="contain"):
        group_by_overlap(np.array([1.0]), np.array([1.5]), np.array([2.0]))


def test_tie_groups_of_the_worked_example_by_hand():
    # Performance weighs 4/8 = 1/2, so a performance interval [lo, hi] moves the Dynascore by
    # half its distances to the point estimate:
    #   C 86.67, perf 80 in [78, 82] -> [86.67 - 1, 86.67 + 1] = [85.67, 87.67]
    #   B 80.67, perf 70 in [66, 74] -> [80.67 - 2, 80.67 + 2] = [78.67, 82.67]
    #   A 76.67, perf 60 in [52, 68] -> [76.67 - 4, 76.67 + 4] = [72.67, 80.67]
    # C's low 85.67 > 82.67 (the highest high below it): cut. B's low 78.67 <= A's high 80.67.
    ranking = compute(THREE, instance_memory_gib=16)
    result = tie_groups(ranking, ci(A=(52, 68), B=(66, 74), C=(78, 82)))
    assert list(result.index) == ["C", "B", "A"]
    assert result["tie_group"].tolist() == [1, 2, 2]
    assert result["dynascore_low"].tolist() == pytest.approx([257 / 3, 236 / 3, 218 / 3])
    assert result["dynascore_high"].tolist() == pytest.approx([263 / 3, 248 / 3, 242 / 3])
    assert result["has_interval"].tolist() == [True, True, True]


def test_without_performance_weight_the_intervals_collapse():
    # Performance weight 0: the Dynascore does not move with performance at all, so only
    # equal scores tie. Weights 1/4 on the other axes (units from the table above):
    #   C (13.33 + 20 + 160 + 180)/4 = 93.33   A (33.33 + 40 + 140 + 160)/4 = 93.33
    #   B (20 + 33.33 + 148 + 164)/4 = 91.33   -> C and A share rank 1 and a group.
    ranking = compute(THREE, {"performance": 0}, instance_memory_gib=16)
    result = tie_groups(ranking, ci(A=(0, 100), B=(0, 100), C=(0, 100)))
    assert list(result.index) == ["C", "A", "B"] and ranking["rank"].tolist() == [1, 1, 3]
    assert result["tie_group"].tolist() == [1, 1, 2]
    assert (result["dynascore_low"] == ranking["dynascore"]).all()


def test_a_model_without_an_interval_is_a_point_and_intervals_are_widened_to_the_estimate():
    ranking = compute(THREE, instance_memory_gib=16)
    # C has no interval; B's interval [71, 75] misses its estimate 70 and becomes [70, 75]:
    # B's Dynascore interval [80.67, 83.17] stays below C's point 86.67.
    result = tie_groups(ranking, ci(B=(71, 75), A=(float("nan"), 61)))
    assert result["has_interval"].tolist() == [False, True, False]
    assert result.loc["B", "dynascore_low"] == pytest.approx(242 / 3)
    assert result.loc["B", "dynascore_high"] == pytest.approx(242 / 3 + 2.5)
    assert result.loc["C", "dynascore_low"] == result.loc["C", "dynascore_high"]
    assert result["tie_group"].tolist() == [1, 2, 3]


def test_tie_groups_refuse_bad_input():
    ranking = compute(THREE, instance_memory_gib=16)
    with pytest.raises(ValueError, match="low end above"):
        tie_groups(ranking, ci(A=(70, 50)))
    with pytest.raises(ValueError, match="sorted"):
        tie_groups(ranking.iloc[::-1], ci())
    with pytest.raises(ValueError, match="low and high"):
        tie_groups(ranking, pd.DataFrame({"lo": [1.0]}))


# -- flip weights ------------------------------------------------------------------------------
def test_flip_weights_of_the_worked_example_by_hand():
    # W = 8. Setting axis j to v: D_a - D_b has the sign of W*gap + (v - w_j)*d_j, zero at
    # v* = w_j - W*gap/d_j, d_j = x_aj - x_bj (units of the upper minus the lower model).
    # C over B: gap 6, W*gap 48, d = (10, -6.67, -13.33, 12, 16)
    #   performance 4 - 48/10 = -0.8 (needs v < -0.8: none)   throughput 1 + 7.2 = 8.2 (> 5)
    #   memory      1 + 48/13.33 = 4.6 (b above a for v > 4.6) robustness 1 - 4 = -3, fairness -2
    # B over A: gap 4, W*gap 32, d = (10, -13.33, -6.67, 8, 4)
    #   performance 4 - 3.2 = 0.8 (v < 0.8)   throughput 1 + 2.4 = 3.4 (v > 3.4)
    #   memory 1 + 4.8 = 5.8 (> 5)   robustness 1 - 4 = -3   fairness 1 - 8 = -7
    ranking = compute(THREE, instance_memory_gib=16)
    points = flip_points(ranking)
    expected = [
        [np.nan, np.nan, 4.6, np.nan, np.nan],
        [0.8, 3.4, np.nan, np.nan, np.nan],
    ]
    np.testing.assert_allclose(points.to_numpy(), expected)
    best = flip_weights(ranking)
    assert best[["above", "below", "axis"]].values.tolist() == [
        ["C", "B", "memory"],
        ["B", "A", "throughput"],  # |+2.4| < |-3.2| (performance)
    ]
    assert best["weight"].tolist() == pytest.approx([4.6, 3.4])
    assert best["delta"].tolist() == pytest.approx([3.6, 2.4])


def test_at_the_flip_weight_the_pair_ties_and_just_past_it_swaps():
    ranking = compute(THREE, instance_memory_gib=16)
    at = compute(THREE, {"memory": 4.6}, instance_memory_gib=16)["dynascore"]
    assert at["C"] == pytest.approx(at["B"])  # (W*D_C and W*D_B are both 765.33 at W = 11.6)
    past = compute(THREE, {"memory": 4.6 + 1e-6}, instance_memory_gib=16)
    short = compute(THREE, {"memory": 4.6 - 1e-6}, instance_memory_gib=16)
    assert list(past.index[:2]) == ["B", "C"]
    assert list(short.index[:2]) == ["C", "B"]
    assert list(ranking.index) == ["C", "B", "A"]


def test_a_range_limit_hides_flips_beyond_it():
    ranking = compute(THREE, instance_memory_gib=16)
    points = flip_points(ranking, weight_range=(0.0, 10.0))  # throughput 8.2 and memory 5.8 now fit
    np.testing.assert_allclose(
        points.to_numpy(), [[np.nan, 8.2, 4.6, np.nan, np.nan], [0.8, 3.4, 5.8, np.nan, np.nan]]
    )


def test_no_flip_when_one_model_dominates_and_single_models_have_no_pairs():
    # D is better on every axis (memory used: less) so no weights can put E above it.
    dominant = table(
        {"D": (90, 100, 1, 90, 90), "E": (50, 10, 8, 60, 60), "F": (70, 50, 4, 75, 80)}
    )
    ranking = compute(dominant)
    best = flip_weights(ranking)
    assert best.loc[best["above"] == "D", "axis"].isna().all()
    assert flip_weights(compute(THREE.iloc[:1])).empty


def test_an_axis_left_out_of_the_dynascore_never_flips():
    constant = THREE.assign(fairness=85.0)  # AMRS 0: fairness is left out
    points = flip_points(compute(constant, instance_memory_gib=16))
    assert points["fairness"].isna().all()


def test_weights_outside_the_range_report_the_range_end():
    # Memory weight 9 (outside 0..5). C over B: v* = 9 - W*gap/d with the new W; the swap
    # side is reached at the closest point of the range.
    weights = {"performance": 0.5, "memory": 9}
    ranking = compute(THREE, weights, instance_memory_gib=16)
    points = flip_points(ranking, weights)
    finite = points.to_numpy()[np.isfinite(points.to_numpy())]
    assert ((finite >= 0) & (finite <= 5)).all()


def random_board(rng: np.random.Generator, n: int) -> pd.DataFrame:
    return pd.DataFrame(
        rng.uniform([20, 1, 0.5, 40, 40], [90, 200, 12, 100, 100], size=(n, 5)),
        index=[f"m{i}" for i in range(n)],
        columns=list(AXES),
    )


@pytest.mark.parametrize("seed", range(6))
def test_every_reported_flip_swaps_its_pair_and_a_smaller_change_does_not(seed: int):
    rng = np.random.default_rng(seed)
    frame = random_board(rng, 7)
    weights = Weights(dict(zip(AXES, rng.uniform(0, 5, size=5).round(2), strict=True)))
    ranking = compute(frame, weights)
    points = flip_points(ranking, weights)
    checked = 0
    for pair, row in points.iterrows():
        above, below = ranking.index[pair], ranking.index[pair + 1]
        for axis, target in row.items():
            current = weights.values[axis]
            if np.isnan(target):
                # nothing in the range swaps the pair: check both ends and the middle
                for v in (0.0, 2.5, 5.0):
                    if v == 0 and sum(w for a, w in weights.values.items() if a != axis) == 0:
                        continue
                    scores = compute(frame, {**weights.values, axis: v})["dynascore"]
                    assert scores[below] <= scores[above] + 1e-9
                continue
            step = 1e-6 * np.sign(target - current)
            past = compute(frame, {**weights.values, axis: target + step})["dynascore"]
            assert past[below] > past[above]
            if abs(target - current) > 1e-5:  # a slightly smaller change keeps the order
                short = compute(frame, {**weights.values, axis: target - step})["dynascore"]
                assert short[below] < short[above]
            checked += 1
    best = flip_weights(ranking, weights)
    for i, (axis, weight, delta) in enumerate(best[["axis", "weight", "delta"]].values):
        row = points.iloc[i]
        if axis is None:
            assert row.isna().all() and np.isnan(weight) and np.isnan(delta)
        else:
            changes = (row - pd.Series(weights.values)).abs()
            assert abs(delta) == pytest.approx(changes.min())
            assert weight == pytest.approx(row[axis])
    assert checked > 0 or best["axis"].isna().all()
