"""Fairness slices against fairlearn's MetricFrame and hand-computed values."""

import pandas as pd
import pytest
from fairlearn.metrics import MetricFrame
from sklearn.metrics import accuracy_score

from metrics.slices import slice_report

GROUPS = ["f"] * 12 + ["m"] * 12 + ["x"] * 3
GOLD = (["pos", "neg"] * 6) + (["pos", "neg"] * 6) + ["pos", "pos", "neg"]
PRED = (["pos", "neg"] * 5 + ["neg", "neg"]) + (["pos", "neg"] * 6) + ["neg", "neg", "pos"]


def test_slice_report_matches_metric_frame_and_hand_values():
    report = slice_report("gender", GROUPS, GOLD, PRED, "accuracy", ["pos", "neg"])
    frame = MetricFrame(
        metrics=lambda y, p: 100 * accuracy_score(y, p),
        y_true=GOLD,
        y_pred=PRED,
        sensitive_features=pd.Series(GROUPS, name="gender"),
    )
    assert report.by_group == pytest.approx(frame.by_group.to_dict())
    # f: 11/12 right; m: 12/12; x: 0/3; overall 23/27.
    assert report.by_group == pytest.approx({"f": 100 * 11 / 12, "m": 100.0, "x": 0.0})
    assert report.overall == pytest.approx(100 * 23 / 27)
    assert report.sizes == {"f": 12, "m": 12, "x": 3}
    assert report.small_groups == ["x"]
    assert report.difference == pytest.approx(100.0)
    assert report.ratio == 0.0
    assert report.worst_group == "x"


def test_small_groups_are_flagged_not_dropped():
    report = slice_report("gender", GROUPS, GOLD, PRED, "accuracy", [], min_group_size=13)
    assert report.small_groups == ["f", "m", "x"]
    assert set(report.by_group) == {"f", "m", "x"}


def test_ratio_is_one_when_every_group_scores_zero():
    report = slice_report("g", ["a", "b"], ["pos", "neg"], ["neg", "pos"], "accuracy", [])
    assert (report.difference, report.ratio) == (0.0, 1.0)


def test_macro_f1_slices_and_json():
    report = slice_report("g", GROUPS, GOLD, PRED, "macro_f1", ["pos", "neg"], min_group_size=1)
    # m: perfect; f: pos tp5 (6 gold, 5 pred) -> 10/11, neg tp6 (6 gold, 7 pred) -> 12/13.
    assert report.by_group["m"] == pytest.approx(100.0)
    assert report.by_group["f"] == pytest.approx(100 * (10 / 11 + 12 / 13) / 2)
    data = report.to_dict()
    assert data["column"] == "g" and data["small_groups"] == []
    assert data["by_group"] == report.by_group


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError):
        slice_report("g", ["a"], ["pos", "neg"], ["pos", "neg"], "accuracy", [])
