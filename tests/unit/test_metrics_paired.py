"""The paired bootstrap behind ``submit --compare-to``: a hand-computed case and properties."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.classification import macro_f1
from metrics.paired import (
    compare_replicates,
    paired_bootstrap,
    paired_metric_replicates,
    resample_indices,
)


def test_hand_computed_case() -> None:
    """Three examples, two resamples drawn from the seed: each replicate's difference is the
    mean of (candidate - baseline) over the same indices, computed here by hand."""
    cand = np.array([1.0, 0.0, 1.0])
    base = np.array([0.0, 0.0, 1.0])
    idx = resample_indices(3, 2, seed=7)
    diffs = [(cand[row] - base[row]).mean() for row in idx]  # the same rows for both models
    result = paired_bootstrap(cand, base, n_resamples=2, seed=7, confidence=0.5)
    assert result.candidate == pytest.approx(2 / 3) and result.baseline == pytest.approx(1 / 3)
    assert result.difference == pytest.approx(1 / 3)
    low, high = np.percentile(diffs, [25, 75])
    assert (result.low, result.high) == pytest.approx((low, high))
    assert result.n_resamples == 2 and result.seed == 7


def test_a_fully_determined_case() -> None:
    """The candidate is right exactly where the baseline is, plus one: every resample's
    difference is (#times example 0 is drawn) / n, never below 0."""
    cand = np.array([1.0, 1.0, 0.0, 0.0])
    base = np.array([0.0, 1.0, 0.0, 0.0])
    result = paired_bootstrap(cand, base, n_resamples=500, seed=1)
    assert result.difference == pytest.approx(0.25)
    assert result.low >= 0.0 and not result.significant_drop


def test_identical_models_are_never_significantly_different() -> None:
    values = np.random.default_rng(3).integers(0, 2, size=200).astype(float)
    result = paired_bootstrap(values, values.copy(), n_resamples=1000, seed=0)
    assert result.difference == 0.0 and result.low <= 0.0 <= result.high
    assert not result.significant_drop and not result.significant_gain


def test_a_clearly_worse_model_is_a_significant_drop() -> None:
    rng = np.random.default_rng(5)
    baseline = (rng.random(300) < 0.9).astype(float)
    candidate = baseline * (rng.random(300) < 0.7)  # loses ~30 % of the baseline's hits
    result = paired_bootstrap(candidate, baseline, n_resamples=1000, seed=0)
    assert result.difference < -0.1 and result.high < 0.0 and result.significant_drop
    flipped = paired_bootstrap(baseline, candidate, n_resamples=1000, seed=0)
    assert flipped.significant_gain and not flipped.significant_drop


def test_pairing_narrows_the_interval() -> None:
    """Two strongly correlated models: the paired interval is far narrower than the spread of
    independently resampled means would suggest, and still contains the true difference."""
    rng = np.random.default_rng(11)
    baseline = (rng.random(400) < 0.7).astype(float)
    candidate = baseline.copy()
    candidate[:4] = 1.0 - candidate[:4]
    paired = paired_bootstrap(candidate, baseline, n_resamples=1000, seed=0)
    assert paired.high - paired.low < 0.03
    assert paired.low <= paired.difference <= paired.high


def test_seeded_and_reproducible() -> None:
    a, b = np.arange(10) % 2, np.arange(10) % 3 == 0
    assert paired_bootstrap(a, b, seed=4) == paired_bootstrap(a, b, seed=4)
    assert paired_bootstrap(a, b, seed=4).to_dict()["significant_drop"] in (True, False)


@pytest.mark.parametrize(("cand", "base"), [([], []), ([1.0], [1.0, 0.0]), ([float("nan")], [1.0])])
def test_bad_inputs_are_refused(cand: list[float], base: list[float]) -> None:
    with pytest.raises(ValueError):
        paired_bootstrap(cand, base)


def test_compare_replicates_needs_paired_arrays() -> None:
    with pytest.raises(ValueError):
        compare_replicates(1.0, 1.0, np.zeros(3), np.zeros(4), seed=0)


def test_macro_f1_is_recomputed_on_every_shared_resample() -> None:
    gold = ["a", "b", "c", "a", "b", "c", "a", "b"]
    cand = ["a", "b", "c", "a", "b", "a", "a", "b"]
    base = ["a", "a", "a", "a", "b", "c", "c", "b"]
    labels = ["a", "b", "c"]
    point_c, point_b, reps_c, reps_b = paired_metric_replicates(
        "macro_f1", gold, cand, base, labels, n_resamples=20, seed=2
    )
    assert point_c == pytest.approx(macro_f1(gold, cand, labels))
    assert point_b == pytest.approx(macro_f1(gold, base, labels))
    idx = resample_indices(len(gold), 20, seed=2)
    row = idx[3]
    resampled = [gold[i] for i in row]
    expected = macro_f1(resampled, [cand[i] for i in row], labels)
    assert reps_c[3] == pytest.approx(expected)


def test_accuracy_and_qa_metrics_are_means_of_per_example_values() -> None:
    point_c, point_b, reps_c, reps_b = paired_metric_replicates(
        "accuracy", ["x", "y"], ["x", "y"], ["x", "x"], ["x", "y"], n_resamples=5, seed=0
    )
    assert (point_c, point_b) == (100.0, 50.0) and reps_c.shape == reps_b.shape == (5,)
    point_c, point_b, _, _ = paired_metric_replicates(
        "squad_f1", [["the cat"]], ["cat"], ["dog"], [], n_resamples=5, seed=0
    )
    assert (point_c, point_b) == (100.0, 0.0)
    with pytest.raises(ValueError):
        paired_metric_replicates("meteor", ["x"], ["x"], ["x"], [], n_resamples=5)
