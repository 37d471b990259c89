"""Bootstrap intervals: determinism, coverage, and agreement with a slow reference."""

import numpy as np
import pytest
from sklearn.metrics import f1_score

from metrics.bootstrap import Interval, bootstrap_mean_interval
from metrics.metric import get_metric


def _labels(n: int, seed: int) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    gold = rng.choice(["pos", "neg", "neu"], size=n).tolist()
    noisy = rng.choice(["pos", "neg", "neu", "other"], size=n).tolist()
    keep = rng.random(n) < 0.6
    return gold, [g if k else p for g, p, k in zip(gold, noisy, keep, strict=True)]


def test_same_seed_same_interval_other_seed_other_interval():
    gold, pred = _labels(300, 1)
    first = get_metric("macro_f1").interval(gold, pred, ["pos", "neg", "neu"], seed=7)
    again = get_metric("macro_f1").interval(gold, pred, ["pos", "neg", "neu"], seed=7)
    other = get_metric("macro_f1").interval(gold, pred, ["pos", "neg", "neu"], seed=8)
    assert first == again
    assert first != other
    assert first.low < first.high
    assert first.to_dict() == {
        "low": first.low,
        "high": first.high,
        "confidence": 0.95,
        "n_resamples": 1000,
    }


def test_accuracy_interval_equals_a_loop_over_the_same_resamples():
    gold, pred = _labels(50, 2)
    correct = 100.0 * (np.array(gold) == np.array(pred))
    idx = np.random.default_rng(3).integers(0, 50, size=(400, 50))
    stats = [correct[row].mean() for row in idx]
    expected = np.percentile(stats, [2.5, 97.5])
    got = get_metric("accuracy").interval(gold, pred, [], n_resamples=400, seed=3)
    assert (got.low, got.high) == pytest.approx(tuple(expected))


def test_macro_f1_interval_equals_a_slow_loop_reference():
    gold, pred = _labels(40, 4)
    labels = ["pos", "neg", "neu", "unused"]
    idx = np.random.default_rng(5).integers(0, 40, size=(300, 40))
    stats = []
    for row in idx:
        g = [gold[i] for i in row]
        p = [pred[i] for i in row]
        present = [label for label in labels if label in g or label in p]
        stats.append(100 * f1_score(g, p, labels=present, average="macro", zero_division=0))
    expected = np.percentile(stats, [2.5, 97.5])
    got = get_metric("macro_f1").interval(gold, pred, labels, n_resamples=300, seed=5)
    assert (got.low, got.high) == pytest.approx(tuple(expected))


def test_qa_intervals_bracket_the_point_estimate():
    golds = ["paris", "london", "new york city", "rome"] * 10
    preds = ["paris", "berlin", "new york", "rome"] * 10
    em = get_metric("exact_match").interval(golds, preds, [], n_resamples=500)
    f1 = get_metric("squad_f1").interval(golds, preds, [], n_resamples=500)
    assert em.low <= 50.0 <= em.high
    assert f1.low <= 70.0 <= f1.high


def test_percentile_interval_covers_the_true_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(2024)
    datasets = rng.random((200, 400)) < 0.7
    covered = 0
    for i, data in enumerate(datasets):
        interval = bootstrap_mean_interval(data.astype(float), seed=i)
        covered += interval.low <= 0.7 <= interval.high
    assert 180 <= covered <= 198


def test_blocks_keep_large_inputs_bounded_and_exact(monkeypatch):
    values = np.arange(10.0)
    whole = bootstrap_mean_interval(values, n_resamples=100, seed=1)
    monkeypatch.setattr("metrics.bootstrap._BLOCK_ELEMENTS", 30)  # 3 rows per block
    blocked = bootstrap_mean_interval(values, n_resamples=100, seed=1)
    assert blocked == whole


@pytest.mark.parametrize("kwargs", [{"n_resamples": 0}, {"confidence": 1.0}, {"confidence": 0.0}])
def test_bad_options_are_refused(kwargs):
    with pytest.raises(ValueError):
        bootstrap_mean_interval(np.ones(5), **kwargs)


def test_unknown_metric_and_empty_input():
    with pytest.raises(KeyError, match="unknown metric 'meteor'"):
        get_metric("meteor").interval(["a"], ["a"], ["a"])
    with pytest.raises(ValueError):
        get_metric("accuracy").interval([], [], [])
    assert isinstance(bootstrap_mean_interval(np.array([1.0])), Interval)
