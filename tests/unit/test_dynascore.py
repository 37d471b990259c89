"""Dynascore: hand-computed example, published reference values, invariances, edge cases."""

import numpy as np
import pandas as pd
import pytest

from dynascore import AXES, DEFAULT_INSTANCE_MEMORY_GIB, amrs, compute, score_utilities, utilities


def table(rows: dict[str, tuple[float, ...]]) -> pd.DataFrame:
    """Models -> (performance, throughput, memory, robustness, fairness)."""
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(AXES))


THREE = table(
    {
        "A": (60, 10, 4, 70, 80),
        "B": (70, 6, 6, 74, 82),
        "C": (80, 4, 10, 80, 90),
    }
)


def test_three_models_by_hand():
    # Memory utility with a 16 GiB instance: A 12, B 10, C 6. Sorted by performance
    # A -> B -> C, both pairs have delta performance 10:
    #   throughput |−4|/10, |−2|/10 -> AMRS 0.3     memory |−2|/10, |−4|/10 -> 0.3
    #   robustness   4/10,    6/10 -> 0.5           fairness  2/10,   8/10 -> 0.5
    # Weights 4,1,1,1,1 -> 1/2 and 1/8 each:
    #   A = 60/2 + (10/.3 + 12/.3 + 70/.5 + 80/.5)/8 = 30 + (1120/3)/8 = 230/3
    #   B = 70/2 + (6/.3 + 10/.3 + 74/.5 + 82/.5)/8 = 35 + (1096/3)/8 = 242/3
    #   C = 80/2 + (4/.3 + 6/.3 + 80/.5 + 90/.5)/8  = 40 + (1120/3)/8 = 260/3
    result = compute(THREE, instance_memory_gib=16)
    assert list(result.index) == ["C", "B", "A"]
    assert result["dynascore"].tolist() == pytest.approx([260 / 3, 242 / 3, 230 / 3])
    assert result["rank"].tolist() == [1, 2, 3]
    assert result.attrs["amrs"] == pytest.approx(
        {"performance": 1, "throughput": 0.3, "memory": 0.3, "robustness": 0.5, "fairness": 0.5}
    )
    assert result.loc["A", "memory_units"] == pytest.approx(12 / 0.3)
    assert result.loc["A", "memory"] == 4  # input columns are kept as given


# Ma et al. 2021, Table 1 (NLI), as transcribed in Potts' CS224u "dynascoring" notebook.
NLI = table(
    {
        "DeBERTa": (69.54, 7.41, 5.71, 75.70, 91.97),
        "RoBERTa": (69.07, 9.23, 4.82, 74.82, 90.94),
        "ALBERT": (67.29, 9.60, 2.18, 74.12, 89.94),
        "T5": (67.16, 7.10, 10.62, 73.47, 91.89),
        "BERT": (64.82, 9.39, 4.13, 66.38, 92.11),
        "Majority Baseline": (32.41, 77.33, 1.15, 100.00, 100.00),
        "FastText": (31.29, 73.94, 2.20, 69.14, 83.23),
    }
)


def test_reproduces_the_published_reference_run():
    # The notebook runs Dynabench's algorithm on the Table 1 inputs with memory utility
    # "memory + 16" (its direction multiplier is +1) and prints these Dynascores.
    published = {
        "DeBERTa": 38.730978,
        "RoBERTa": 38.492792,
        "ALBERT": 37.548582,
        "T5": 37.539321,
        "BERT": 36.228453,
        "Majority Baseline": 22.552271,
        "FastText": 20.941156,
    }
    utils = NLI.astype(float).assign(memory=NLI["memory"] + 16)
    scored = score_utilities(utils)
    assert scored["dynascore"].to_dict() == pytest.approx(published, abs=5e-6)
    assert scored.loc["DeBERTa", "throughput_units"] == pytest.approx(1.511594, abs=5e-6)
    assert scored.loc["T5", "fairness_units"] == pytest.approx(16.674953, abs=5e-6)


def reference(frame: pd.DataFrame, weights: dict, memory_gib: float, tol: float = 1e-4):
    """Slow, loop-based restatement of the formula, for cross-checking."""
    utils = {m: dict(zip(AXES, row, strict=True)) for m, row in frame.iterrows()}
    for u in utils.values():
        u["memory"] = memory_gib - u["memory"]
    models = sorted(utils, key=lambda m: utils[m]["performance"])
    best = max(u["performance"] for u in utils.values())
    pairs = [
        (a, b)
        for a, b in zip(models, models[1:], strict=False)
        if utils[b]["performance"] - utils[a]["performance"] > tol * abs(best)
    ]
    total = sum(weights.values())
    scores = {}
    for m in utils:
        scores[m] = 0.0
        for axis in AXES:
            ratios = [
                abs(utils[b][axis] - utils[a][axis])
                / (utils[b]["performance"] - utils[a]["performance"])
                for a, b in pairs
            ]
            scores[m] += weights[axis] / total * utils[m][axis] / (sum(ratios) / len(ratios))
    return scores


def test_matches_a_slow_reference_on_random_leaderboards():
    rng = np.random.default_rng(0)
    weights = {"performance": 3, "throughput": 2, "memory": 0.5, "robustness": 1, "fairness": 1}
    for _ in range(20):
        frame = pd.DataFrame(
            rng.uniform([20, 1, 0.5, 40, 40], [90, 200, 12, 100, 100], size=(8, 5)),
            index=[f"m{i}" for i in range(8)],
            columns=list(AXES),
        )
        got = compute(frame, weights)["dynascore"].to_dict()
        assert got == pytest.approx(reference(frame, weights, DEFAULT_INSTANCE_MEMORY_GIB))


def test_default_instance_memory_is_dynaboards_ml_m5_2xlarge():
    assert DEFAULT_INSTANCE_MEMORY_GIB == 32.0
    assert utilities(THREE, 32.0)["memory"].tolist() == [28.0, 26.0, 22.0]


def test_rescaling_an_axis_changes_nothing():
    scaled = THREE.assign(throughput=THREE["throughput"] * 1000)
    before, after = compute(THREE), compute(scaled)
    assert list(after.index) == list(before.index)
    assert after["dynascore"].to_numpy() == pytest.approx(before["dynascore"].to_numpy())


def test_shifting_memory_keeps_the_ranking():
    shifted = compute(THREE.assign(memory=THREE["memory"] + 3))
    before = compute(THREE)
    assert list(shifted.index) == list(before.index)
    gaps = shifted["dynascore"] - before["dynascore"]
    assert gaps.to_numpy() == pytest.approx(np.full(3, gaps.iloc[0]))


def test_zero_weight_removes_an_axis():
    weights = {"memory": 0}
    base = compute(THREE, weights)["dynascore"]
    other_memory = compute(THREE.assign(memory=[9.0, 1.0, 5.0]), weights)["dynascore"]
    assert other_memory.sort_index().to_numpy() == pytest.approx(base.sort_index().to_numpy())
    # Without memory: A = (4*60 + 10/.3 + 140 + 160) / 7.
    assert base["A"] == pytest.approx((240 + 10 / 0.3 + 140 + 160) / 7)


def test_near_equal_performance_pairs_are_skipped():
    # max performance 16, tolerance 2**-5 -> threshold 0.5: the pair 8 -> 8.5 (delta
    # exactly 0.5) is skipped, leaving only 8.5 -> 16 (delta 7.5).
    utils = pd.DataFrame(
        {"performance": [8.0, 8.5, 16.0], "throughput": [1.0, 100.0, 16.0]}, index=list("xyz")
    )
    rates = amrs(utils, tolerance=2**-5)
    assert rates["throughput"] == pytest.approx(84 / 7.5)
    assert rates["performance"] == 1.0
    with_pair = amrs(utils, tolerance=2**-6)  # threshold 0.25 keeps both pairs
    assert with_pair["throughput"] == pytest.approx((99 / 0.5 + 84 / 7.5) / 2)


def test_ties_share_a_rank():
    tied = table({"A": (70, 5, 4, 80, 80), "B": (70, 5, 4, 80, 80), "C": (60, 5, 5, 70, 70)})
    result = compute(tied)
    assert result["rank"].tolist() == [1, 1, 3]
    assert list(result.index) == ["A", "B", "C"]


def test_constant_axis_is_left_out_like_a_zero_weight():
    constant = THREE.assign(fairness=85.0)
    result = compute(constant)
    assert result.attrs["excluded_axes"] == ["fairness"]
    assert result["fairness_units"].isna().all()
    same = compute(constant, {"fairness": 0})["dynascore"]
    assert result["dynascore"].to_numpy() == pytest.approx(same.to_numpy())
    assert np.isfinite(result["dynascore"]).all()


def test_one_model_scores_by_performance():
    result = compute(THREE.loc[["B"]])
    assert result["dynascore"].tolist() == [70.0]
    assert result["rank"].tolist() == [1]
    assert result.attrs["excluded_axes"] == ["throughput", "memory", "robustness", "fairness"]


def test_only_degenerate_axes_weighted_gives_a_tie_at_zero():
    weights = {"performance": 0, "throughput": 0, "memory": 0, "robustness": 0, "fairness": 1}
    result = compute(THREE.assign(fairness=85.0), weights)
    assert result["dynascore"].tolist() == [0.0, 0.0, 0.0]
    assert result["rank"].tolist() == [1, 1, 1]


@pytest.mark.parametrize(
    "frame, message",
    [
        (THREE.drop(columns="fairness"), "lacks the axes"),
        (THREE.assign(memory=[1.0, np.nan, 2.0]), "missing or infinite"),
        (pd.concat([THREE, THREE.iloc[:1]]), "more than once"),
        (THREE.iloc[:0], "no models"),
    ],
)
def test_bad_tables_are_refused(frame, message):
    with pytest.raises(ValueError, match=message):
        compute(frame)
