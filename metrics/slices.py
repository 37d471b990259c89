"""Fairness slices: a task metric per group of a slice column, via fairlearn's MetricFrame.

``difference`` is the largest minus the smallest group score and ``ratio`` the smallest
over the largest (both fairlearn's ``between_groups`` definitions). When every group
scores 0 the groups are equal, so ``ratio`` is 1.0 rather than undefined. Groups with
fewer than ``min_group_size`` examples are flagged in ``small_groups`` but kept in every
number: hiding them would hide exactly the groups a slice exists to show. The worst
group is the lowest-scoring one for higher-is-better metrics (ties: first in sorted
group order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from metrics._checks import check_pair
from metrics.metric import get_metric


@dataclass(frozen=True)
class SliceReport:
    """Per-group scores of one slice column and their disparity."""

    column: str
    by_group: dict[str, float]
    sizes: dict[str, int]
    small_groups: list[str]
    difference: float
    ratio: float
    worst_group: str
    overall: float

    def to_dict(self) -> dict[str, object]:
        """JSON-ready mapping."""
        return {
            "column": self.column,
            "by_group": dict(self.by_group),
            "sizes": dict(self.sizes),
            "small_groups": list(self.small_groups),
            "difference": self.difference,
            "ratio": self.ratio,
            "worst_group": self.worst_group,
            "overall": self.overall,
        }


def slice_report(
    column: str,
    groups: Sequence[str],
    gold: Sequence[Any],
    pred: Sequence[str],
    metric_name: str,
    labels: Sequence[str],
    min_group_size: int = 10,
) -> SliceReport:
    """Score ``metric_name`` per group of ``groups`` (the values of slice ``column``)."""
    check_pair(gold, pred)
    check_pair(groups, pred)
    metric = get_metric(metric_name)

    gold_items, pred_items = list(gold), list(pred)

    def score(rows: np.ndarray, same_rows: np.ndarray) -> float:
        # fairlearn receives row numbers, not the gold itself: a gold entry may be a tuple of
        # references, which fairlearn would try to stack into a matrix.
        return metric.score([gold_items[i] for i in rows], [pred_items[i] for i in rows], labels)

    # fairlearn pulls in scikit-learn and SciPy (~2 s): imported when a slice is scored,
    # not by every process that merely imports the pipeline (the CLI's account commands).
    from fairlearn.metrics import MetricFrame

    rows = np.arange(len(gold_items))
    frame = MetricFrame(
        metrics=score,
        y_true=rows,
        y_pred=rows,
        sensitive_features=pd.Series([str(g) for g in groups], name=column),
    )
    by_group = {str(k): float(v) for k, v in frame.by_group.sort_index().items()}
    sizes = {str(k): int(v) for k, v in pd.Series(groups).astype(str).value_counts().items()}
    sizes = {name: sizes[name] for name in by_group}
    high = max(by_group.values())
    pick = min if metric.higher_is_better else max
    return SliceReport(
        column=column,
        by_group=by_group,
        sizes=sizes,
        small_groups=[name for name, size in sizes.items() if size < min_group_size],
        difference=float(frame.difference(method="between_groups")),
        ratio=1.0 if high == 0 else float(frame.ratio(method="between_groups")),
        worst_group=pick(by_group, key=by_group.__getitem__),
        overall=float(frame.overall),
    )
