"""How stable a Dynascore ranking is: tie groups at 95 % and single-axis flip weights.

Both take the ranking :func:`dynascore.compute` returns (sorted by Dynascore, with the
``<axis>_units`` columns and ``attrs["weights"]``) and stay pure numpy / pandas.

Tie groups. The only uncertainty the platform measures is performance's 95 % bootstrap
interval ``[lo_m, hi_m]``. With the exchange rates (AMRS) and the other axes held at the
leaderboard's point estimates, a model's Dynascore is ``D_m = s_p * p_m + c_m`` where
``s_p`` is performance's normalised weight (its AMRS is 1), so the interval propagates
exactly::

    [D_m - s_p * (p_m - lo_m),  D_m + s_p * (hi_m - p_m)]

(the bootstrap interval is first widened to contain the point estimate; a model without
an interval is a point). Two models cannot be separated when their intervals overlap
(closed intervals, compared at the ranking's 1e-9 precision). Tie groups are the connected
components of that overlap relation (transitive), which are runs of consecutive ranks: a
group boundary sits between ranks k and k+1 exactly when every model above has its lower
end above the upper end of every model below, i.e. ``min(low[:k+1]) > max(high[k+1:])``.
Models in different groups are separated; inside a group no boundary between adjacent
ranks is, so adjacent ranks in a group are ties.

Flip weights. For a fixed set of models the AMRS does not depend on the weights, so with
``x_mi`` the units of axis i (``u_mi / AMRS_i``), ``U`` the usable axes and ``W`` the sum of
the viewer's weights over ``U``::

    D_m(w) = sum_{i in U} w_i x_mi / W

For adjacent models a (above) and b, ``delta = D_a - D_b >= 0`` and ``d_j = x_aj - x_bj``;
setting the weight of axis j to v gives::

    D_a(v) - D_b(v) = (W * delta + (v - w_j) * d_j) / (W - w_j + v)

The denominator is positive for any valid weights, the numerator is linear in v and
vanishes at ``v* = w_j - W * delta / d_j``: b ranks above a for v > v* when d_j < 0 and for
v < v* when d_j > 0. The flip weight of axis j is the point nearest to w_j of the closure
of the set of weights in the allowed range (0-5) where b is strictly above a: ``v*`` itself
(where the two tie) unless the viewer's weight lies outside the range; none when the set is
empty (d_j = 0, an axis left out of the Dynascore, or v* out of reach). Per pair the axis
with the smallest ``|v - w_j|`` is reported (first in axis order on equal changes).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import pandas as pd

from configs.vocabulary.axes import AXES
from dynascore.weights import Weights

CONFIDENCE = 0.95
WEIGHT_RANGE: tuple[float, float] = (0.0, 5.0)
DECIMALS = 9  # the precision at which compute() ranks (RANK_DECIMALS)

Floats = npt.NDArray[np.float64]


def _floats(values: object) -> Floats:
    return np.asarray(values, dtype=np.float64)


def _check_ranking(ranking: pd.DataFrame) -> Floats:
    """The ranking's Dynascores; ``ValueError`` unless it looks like compute()'s output."""
    needed = ["dynascore", "performance", *(f"{axis}_units" for axis in AXES)]
    missing = [column for column in needed if column not in ranking.columns]
    if missing:
        raise ValueError(f"the ranking lacks the columns: {', '.join(missing)}.")
    if "weights" not in ranking.attrs:
        raise ValueError("the ranking lacks attrs['weights'] (pass what compute() returns).")
    scores = _floats(ranking["dynascore"])
    if not np.isfinite(scores).all():
        raise ValueError("the ranking has missing or infinite Dynascores.")
    if scores.size > 1 and np.any(np.round(np.diff(scores), DECIMALS) > 0):
        raise ValueError("the ranking must be sorted by Dynascore, best first.")
    return scores


def group_by_overlap(scores: Floats, low: Floats, high: Floats) -> npt.NDArray[np.int64]:
    """Tie group (1, 2, ... from the top) of each model of a ranking sorted best first.

    ``low <= scores <= high`` are each model's interval. A boundary falls between
    positions k and k+1 iff ``min(low[:k+1]) > max(high[k+1:])`` (at 1e-9), so the groups
    are the connected components of "the intervals overlap".
    """
    scores, low, high = _floats(scores), _floats(low), _floats(high)
    if not (scores.shape == low.shape == high.shape) or scores.ndim != 1:
        raise ValueError("scores, low and high must be 1-d arrays of one length.")
    if scores.size == 0:
        return np.zeros(0, dtype=np.int64)
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise ValueError("interval ends must be finite.")
    if np.any(low > scores) or np.any(high < scores):
        raise ValueError("every interval must contain its score.")
    above_low = np.minimum.accumulate(low)[:-1]
    below_high = np.maximum.accumulate(high[::-1])[::-1][1:]
    cuts = np.round(above_low, DECIMALS) > np.round(below_high, DECIMALS)
    groups = np.ones(scores.size, dtype=np.int64)
    groups[1:] += np.cumsum(cuts)
    return groups


def tie_groups(ranking: pd.DataFrame, performance_ci: pd.DataFrame) -> pd.DataFrame:
    """Dynascore intervals and tie groups for the rows of ``ranking`` (compute()'s output).

    ``performance_ci`` (index: model) has columns ``low`` and ``high``: each model's 95 %
    performance interval; models it lacks, or NaN ends, count as exact. Returns, in the
    ranking's order, ``dynascore_low``, ``dynascore_high``, ``has_interval`` and
    ``tie_group`` (1 for the top group).
    """
    scores = _check_ranking(ranking)
    missing_columns = {"low", "high"} - set(performance_ci.columns)
    if missing_columns:
        raise ValueError("performance_ci needs the columns low and high.")
    if not performance_ci.index.is_unique:
        raise ValueError("performance_ci names a model more than once.")
    ci = performance_ci.reindex(ranking.index)
    lo, hi = _floats(ci["low"]), _floats(ci["high"])
    known = np.isfinite(lo) & np.isfinite(hi)
    if np.any(lo[known] > hi[known]):
        raise ValueError("a performance interval has its low end above its high end.")
    perf = _floats(ranking["performance"])
    lo = np.where(known, np.minimum(lo, perf), perf)
    hi = np.where(known, np.maximum(hi, perf), perf)
    share = float(ranking.attrs["weights"].get("performance", 0.0))
    low = scores - share * (perf - lo)
    high = scores + share * (hi - perf)
    return pd.DataFrame(
        {
            "dynascore_low": low,
            "dynascore_high": high,
            "has_interval": known,
            "tie_group": group_by_overlap(scores, low, high),
        },
        index=ranking.index,
    )


def rank_intervals(
    low: Floats, high: Floats
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Each model's 95 % rank interval from the Dynascore intervals (``dynascore_low``,
    ``dynascore_high``): the best rank is 1 plus the models whose interval lies wholly
    above its own, the worst is the number of models less those wholly below it. So the
    interval holds every rank the model could take with each Dynascore anywhere in its
    interval; it is the model's own (it does not chain through neighbours, as tie groups
    do) and contains its rank. O(n log n)."""
    low, high = _floats(low), _floats(high)
    n = low.size
    above = n - np.searchsorted(np.sort(low), high, side="right")  # others' low > my high
    below = np.searchsorted(np.sort(high), low, side="left")  # others' high < my low
    best: npt.NDArray[np.int64] = (1 + above).astype(np.int64)
    worst: npt.NDArray[np.int64] = (n - below).astype(np.int64)
    return best, worst


def flip_points(
    ranking: pd.DataFrame,
    weights: Mapping[str, float] | Weights | None = None,
    *,
    weight_range: tuple[float, float] = WEIGHT_RANGE,
) -> pd.DataFrame:
    """Per adjacent pair (rows: the upper model's position 0..n-2) and axis (columns), the
    weight of that axis alone that swaps the pair (see the module docstring); NaN if none.

    ``weights`` must be the weights ``ranking`` was computed with.
    """
    scores = _check_ranking(ranking)
    low_w, high_w = (float(v) for v in weight_range)
    if not (np.isfinite(low_w) and np.isfinite(high_w) and 0 <= low_w < high_w):
        raise ValueError("the weight range must be finite with 0 <= low < high.")
    values = Weights.coerce(weights).values
    current = _floats([values[axis] for axis in AXES])
    units = np.column_stack([_floats(ranking[f"{axis}_units"]) for axis in AXES])
    usable = np.isfinite(units).all(axis=0)
    total = float(current[usable].sum())
    if scores.size < 2:
        return pd.DataFrame(np.zeros((0, len(AXES))), columns=list(AXES))
    gap = np.maximum(scores[:-1] - scores[1:], 0.0)[:, None]  # D_a - D_b, sorted best first
    diff = units[:-1] - units[1:]  # d_j = x_aj - x_bj
    with np.errstate(divide="ignore", invalid="ignore"):
        tie = current - total * gap / diff  # v*
    rising = diff < 0  # b overtakes a for v > v*
    falling = diff > 0  # ... for v < v*
    up = np.maximum(tie, low_w)
    down = np.minimum(tie, high_w)
    result = np.full(diff.shape, np.nan)
    ok_up = rising & (up < high_w)
    ok_down = falling & (down > low_w)
    result[ok_up] = up[ok_up]
    result[ok_down] = down[ok_down]
    result[:, ~usable] = np.nan
    return pd.DataFrame(result, columns=list(AXES))


def flip_weights(
    ranking: pd.DataFrame,
    weights: Mapping[str, float] | Weights | None = None,
    *,
    weight_range: tuple[float, float] = WEIGHT_RANGE,
) -> pd.DataFrame:
    """For each adjacent pair of ``ranking``: ``above``, ``below`` (models), and the one-axis
    change that swaps them with the smallest ``|delta|``: ``axis`` (None if no single-axis
    change in ``weight_range`` swaps them), ``weight`` (the new weight) and ``delta``."""
    points = flip_points(ranking, weights, weight_range=weight_range).to_numpy(dtype=np.float64)
    values = Weights.coerce(weights).values
    current = _floats([values[axis] for axis in AXES])
    change = np.abs(points - current)
    found = np.isfinite(change).any(axis=1) if len(points) else np.zeros(0, dtype=bool)
    best = np.argmin(np.where(np.isfinite(change), change, np.inf), axis=1)
    rows = np.arange(len(points))
    weight = np.where(found, points[rows, best], np.nan)
    names = np.array(AXES, dtype=object)[best]
    models = ranking.index
    return pd.DataFrame(
        {
            "above": models[:-1],
            "below": models[1:],
            "axis": pd.Series(np.where(found, names, None), dtype=object),
            "weight": weight,
            "delta": weight - current[best],
        }
    )
