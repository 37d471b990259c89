"""Averaging a task's per-round metrics into one row per model (weighted mean)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd


def _long_form(per_round: pd.DataFrame) -> pd.DataFrame:
    """Columns ``model``, ``round`` and the metrics, from either accepted layout."""
    if isinstance(per_round.index, pd.MultiIndex):
        if per_round.index.nlevels != 2:
            raise ValueError("the per-round index must have two levels: (model, round).")
        frame = per_round.copy()
        frame.index = frame.index.set_names(["model", "round"])
        return frame.reset_index()
    if {"model", "round"} <= set(per_round.columns):
        return per_round.reset_index(drop=True)
    raise ValueError("per-round metrics need a (model, round) index or model/round columns.")


def _round_weights(rounds: list[str], round_weights: Mapping[str, float] | None) -> pd.Series:
    if round_weights is None:
        return pd.Series(1.0, index=rounds)
    unknown = sorted(map(str, set(round_weights) - set(rounds)))
    missing = sorted(map(str, set(rounds) - set(round_weights)))
    if unknown or missing:
        raise ValueError(
            f"round weights must name exactly the task's rounds; unknown: {unknown or 'none'},"
            f" without a weight: {missing or 'none'}."
        )
    for name, weight in round_weights.items():
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise ValueError(f"the weight of round {name!r} must be a number.")
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"the weight of round {name!r} must be a finite number >= 0.")
    weights = pd.Series({name: float(round_weights[name]) for name in rounds})
    if weights.sum() == 0:
        raise ValueError("at least one round weight must be greater than 0.")
    return weights


def average_rounds(
    per_round: pd.DataFrame,
    round_weights: Mapping[str, float] | None = None,
    *,
    drop_incomplete: bool = False,
) -> pd.DataFrame:
    """Per-model weighted mean of the numeric metric columns over the rounds.

    Rounds weigh equally unless ``round_weights`` names a weight for every round. A model
    without a score for some positively weighted round is an error, or is dropped when
    ``drop_incomplete`` (Dynabench's behaviour); NaN metric values are an error.
    """
    frame = _long_form(per_round)
    if frame.duplicated(["model", "round"]).any():
        raise ValueError("a (model, round) pair appears more than once.")
    metrics = [c for c in frame.columns if c not in ("model", "round")]
    metrics = [c for c in metrics if pd.api.types.is_numeric_dtype(frame[c])]
    if frame[metrics].isna().to_numpy().any():
        raise ValueError("per-round metrics contain missing values.")
    weights = _round_weights(list(dict.fromkeys(frame["round"])), round_weights)
    frame = frame.assign(_w=frame["round"].map(weights))
    frame = frame[frame["_w"] > 0]
    needed = int((weights > 0).sum())
    complete = frame.groupby("model", sort=False)["round"].nunique() == needed
    if not complete.all():
        if not drop_incomplete:
            lacking = ", ".join(sorted(map(str, complete.index[~complete])))
            raise ValueError(f"models without a score for every weighted round: {lacking}.")
        frame = frame[frame["model"].isin(complete.index[complete])]
    weighted = frame[metrics].mul(frame["_w"], axis=0).assign(model=frame["model"])
    totals = weighted.groupby("model", sort=False).sum()
    return totals / weights[weights > 0].sum()
