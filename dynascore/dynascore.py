"""Dynaboard's Dynascore (Ma et al., NeurIPS 2021), as Dynabench computes it.

Given one row per model with the axes performance, throughput, memory, robustness and
fairness (each already averaged over the task's rounds, see :func:`average_rounds`):

1. Utilities. Every axis is a utility where more is better: memory becomes
   ``instance_memory_gib - memory``; the other axes are used as they are.
2. AMRS. Sort the models by performance (ascending) and take consecutive pairs. Pairs
   whose performance differs by at most ``tolerance * |max performance|`` are skipped
   (tolerance 1e-4) so that near-ties do not blow up the ratio. For each axis i::

       AMRS_i = mean over kept pairs of |delta u_i| / delta performance

   The numerator takes the absolute value, the denominator is positive by the sort, so
   AMRS_i >= 0 and AMRS_performance = 1. An AMRS is "how many units of axis i the
   leaderboard trades for one point of performance".
3. Dynascore. With weights w normalised to sum to 1::

       dynascore = sum_i (w_i / sum_j w_j) * u_i / AMRS_i

   ``u_i / AMRS_i`` ("<axis>_units") is axis i in performance units, so rescaling an
   axis (bytes vs GiB) changes nothing, and shifting an axis by a constant shifts every
   model's score equally.

Edge cases (Dynabench turns them into NaN, then shows every model's Dynascore as 0; we
never let a NaN or an infinity into the ranking). An axis whose AMRS is 0 (the axis is
constant over the kept pairs) or undefined (no pair kept: one model, or all models
within the tolerance of each other) is left out, exactly as if its weight were 0: its
"<axis>_units" column is NaN, and the remaining weights are renormalised. Performance is
never left out (its AMRS is 1 by definition), so a one-model leaderboard scores that
model by its performance. If every positively weighted axis is left out, all models
score 0 and share rank 1. The AMRS values, the left-out axes and the effective weights
are in the result's ``attrs``. NaN or infinite inputs are refused with ``ValueError``
(Dynabench drops models without complete scores before scoring; callers do that here).

``DEFAULT_INSTANCE_MEMORY_GIB`` is 32: Dynaboard's tasks ran on AWS SageMaker
``ml.m5.2xlarge`` instances (Dynabench's task default ``instance_type``; its instance table
gives that type 32 GB, AWS lists 32 GiB), and Dynabench's memory offset is that size.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import pandas as pd

from configs.vocabulary.axes import AXES
from dynascore.weights import Weights

DEFAULT_INSTANCE_MEMORY_GIB = 32.0
RANK_DECIMALS = 9


def check_table(table: pd.DataFrame) -> None:
    """Raise ``ValueError`` unless ``table`` has unique models and finite numeric axes."""
    missing = [axis for axis in AXES if axis not in table.columns]
    if missing:
        raise ValueError(f"the metric table lacks the axes: {', '.join(missing)}.")
    if table.empty:
        raise ValueError("the metric table has no models.")
    if not table.index.is_unique:
        duplicated = sorted(map(str, table.index[table.index.duplicated()].unique()))
        raise ValueError(f"models appear more than once: {', '.join(duplicated)}.")
    values = table.loc[:, list(AXES)]
    non_numeric = [c for c in AXES if not pd.api.types.is_numeric_dtype(values[c])]
    if non_numeric:
        raise ValueError(f"axes must be numeric: {', '.join(non_numeric)}.")
    bad = ~np.isfinite(values.to_numpy(dtype=float))
    if bad.any():
        rows = sorted(map(str, table.index[bad.any(axis=1)]))
        raise ValueError(f"missing or infinite metric values for models: {', '.join(rows)}.")


def utilities(table: pd.DataFrame, instance_memory_gib: float) -> pd.DataFrame:
    """Axes as utilities (more is better): memory becomes instance memory minus memory."""
    check_table(table)
    result = table.loc[:, list(AXES)].astype(float)
    result["memory"] = float(instance_memory_gib) - result["memory"]
    return result


def amrs(utilities: pd.DataFrame, *, tolerance: float = 1e-4) -> pd.Series:
    """AMRS of every column against ``performance``; NaN where no pair of models is kept."""
    if tolerance < 0:
        raise ValueError("tolerance must be >= 0.")
    values = utilities.to_numpy(dtype=float)
    perf = utilities["performance"].to_numpy(dtype=float)
    ordered = values[np.argsort(perf, kind="stable")]
    delta = np.diff(ordered, axis=0)
    delta_perf = delta[:, utilities.columns.get_loc("performance")]
    threshold = tolerance * abs(perf.max()) if perf.size else 0.0
    kept = delta_perf > threshold
    ratios = np.abs(delta[kept]) / delta_perf[kept, None]
    counts = np.sum(~np.isnan(ratios), axis=0)
    sums = np.nansum(ratios, axis=0)
    means = np.divide(sums, counts, out=np.full(sums.shape, np.nan), where=counts > 0)
    return pd.Series(means, index=utilities.columns, name="amrs")


def effective_weights(weights: Weights, rates: pd.Series) -> dict[str, float]:
    """Normalised weights over the axes with a usable AMRS (empty if none is weighted)."""
    usable = {axis for axis in AXES if np.isfinite(rates[axis]) and rates[axis] > 0}
    kept = {axis: w for axis, w in weights.values.items() if axis in usable and w > 0}
    total = sum(kept.values())
    return {axis: w / total for axis, w in kept.items()} if total else {}


def units_of(utils: pd.DataFrame, *, tolerance: float = 1e-4) -> tuple[pd.DataFrame, pd.Series]:
    """Every axis in performance units (``u_i / AMRS_i``; NaN for a left-out axis) and the
    AMRS per axis (performance: 1). Neither depends on the weights."""
    rates = amrs(utils.loc[:, list(AXES)], tolerance=tolerance)
    rates["performance"] = 1.0
    usable = [axis for axis in AXES if np.isfinite(rates[axis]) and rates[axis] > 0]
    units = utils.loc[:, usable] / rates[usable]
    return units.reindex(columns=list(AXES)), rates


def weighted_scores(units: pd.DataFrame, shares: Mapping[str, float]) -> npt.NDArray[np.float64]:
    """The Dynascore: ``sum_i share_i * units_i`` over ``shares`` (normalised weights of the
    usable axes, see :func:`effective_weights`), added in the order of ``shares``."""
    score = np.zeros(len(units))
    for axis, share in shares.items():
        score = score + share * units[axis].to_numpy(dtype=np.float64)
    return score


def ranks(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Rank of each score, 1 = best; scores equal to ``RANK_DECIMALS`` share the best rank."""
    rounded = pd.Series(scores).round(RANK_DECIMALS)
    result: npt.NDArray[np.int64] = rounded.rank(method="min", ascending=False).to_numpy(
        dtype=np.int64
    )
    return result


def ranking_order(
    scores: npt.NDArray[np.float64], performance: npt.NDArray[np.float64]
) -> npt.NDArray[np.intp]:
    """Positions sorted by Dynascore, then performance, descending (stable)."""
    return np.lexsort((-np.asarray(performance, dtype=np.float64), -scores))


def score_utilities(
    utils: pd.DataFrame,
    weights: Mapping[str, float] | Weights | None = None,
    *,
    tolerance: float = 1e-4,
) -> pd.DataFrame:
    """Dynascore, rank and "<axis>_units" from a utility table (index: model, columns: AXES).

    Rows keep the order of ``utils``; :func:`compute` sorts them.
    """
    weights = Weights.coerce(weights)
    units, rates = units_of(utils, tolerance=tolerance)
    shares = effective_weights(weights, rates)
    score = weighted_scores(units, shares)
    result = pd.DataFrame({"dynascore": score}, index=utils.index)
    result["rank"] = ranks(score).astype(int)
    for axis in AXES:
        result[f"{axis}_units"] = units[axis]
    result.attrs = {
        "amrs": {axis: float(rates[axis]) for axis in AXES},
        "excluded_axes": [axis for axis in AXES if units[axis].isna().all()],
        "weights": shares,
    }
    return result


def compute(
    table: pd.DataFrame,
    weights: Mapping[str, float] | Weights | None = None,
    *,
    instance_memory_gib: float = DEFAULT_INSTANCE_MEMORY_GIB,
    tolerance: float = 1e-4,
) -> pd.DataFrame:
    """Dynascore ranking of ``table`` (index: model; numeric columns include AXES).

    Columns: ``dynascore``, ``rank`` (ties share the best rank), the input columns, then
    ``<axis>_units``; sorted by Dynascore, then performance, descending.
    """
    scored = score_utilities(utilities(table, instance_memory_gib), weights, tolerance=tolerance)
    unit_columns = [f"{axis}_units" for axis in AXES]
    result = scored[["dynascore", "rank"]].join(table).join(scored[unit_columns])
    order = ranking_order(scored["dynascore"].to_numpy(float), table["performance"].to_numpy(float))
    result = result.iloc[order]
    result.attrs = {**scored.attrs, "instance_memory_gib": float(instance_memory_gib)}
    return result
