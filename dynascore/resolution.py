"""Measurement resolution: differences a board cannot tell from noise count as none.

Dynaboard's formula trusts every digit. Memory and throughput are measured, not computed:
four copies of one image differ by half a megabyte and a percent of throughput from run to
run, and on a board whose models hardly differ in memory that noise sets memory's
exchange rate (its AMRS) so low that its points swamp performance. So each measured axis
has a **resolution** on a board, taken from the profiler's own repeats with a floor:

* throughput (relative): the larger of 2 % (what the calibration tests hold the profiler
  to) and the median over the board's models of their repeats' range over their median;
* memory (absolute): 16 MiB (the sampler runs once per evaluation, so there are no
  repeats to take a spread from; sampling noise between runs of one image is well under it);
* performance, robustness and fairness are computed from the held-out examples, not
  measured: their resolution is 0 (performance's uncertainty is its bootstrap interval).

The models' values of an axis are then *coarsened*: from the best value down, every value
within one resolution of the first value of its group joins that group and takes the
group's median. A group never spans more than one resolution (no chains across a board),
values in one group are equal, so differences inside a resolution neither earn points nor
set an exchange rate, and an axis all of whose models fall in one group is constant,
so it is left out exactly as Dynaboard leaves out a constant axis. With no resolution
(``None``) every value is kept as it is, which is how Dynaboard's published tables are
reproduced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from configs.vocabulary.axes import AXES

THROUGHPUT_FLOOR = 0.02  # relative: the profiler is held within 2 % of the truth
MEMORY_FLOOR_GIB = 16 / 1024  # 16 MiB


@dataclass(frozen=True)
class Resolution:
    """How far apart two values of an axis must be to count as different: ``amount`` in the
    axis's unit, or a fraction of the larger value when ``relative``."""

    amount: float
    relative: bool = False

    def to_dict(self) -> dict[str, float | bool]:
        return {"amount": self.amount, "relative": self.relative}


NONE = Resolution(0.0)


def board_resolutions(throughput_spreads: Sequence[float | None]) -> dict[str, Resolution]:
    """Each axis's resolution on a board, from its models' throughput spreads (range over
    median of their repeats; a model that recorded none is left out of the median, and with
    none at all the floor stands)."""
    return {
        "performance": NONE,
        "throughput": Resolution(max(THROUGHPUT_FLOOR, _median(throughput_spreads)), True),
        "memory": Resolution(MEMORY_FLOOR_GIB),
        "robustness": NONE,
        "fairness": NONE,
    }


def coarsen(values: npt.ArrayLike, resolution: Resolution) -> npt.NDArray[np.float64]:
    """``values`` with every group of values within one resolution of its group's first
    (largest) value replaced by the group's median. Order and length are kept."""
    data = np.asarray(values, dtype=np.float64)
    if resolution.amount <= 0 or data.size < 2:
        return data.copy()
    order = np.argsort(-data, kind="stable")
    result = np.empty_like(data)
    start = 0
    while start < data.size:
        anchor = data[order[start]]
        reach = resolution.amount * abs(anchor) if resolution.relative else resolution.amount
        stop = start + 1
        while stop < data.size and anchor - data[order[stop]] <= reach:
            stop += 1
        members = order[start:stop]
        result[members] = _middle(data[members])
        start = stop
    return result


def _middle(values: npt.NDArray[np.float64]) -> float:
    """The median, halving before adding (no overflow near the largest floats); the
    page's script computes it the same way, to the last bit."""
    ordered = np.sort(values)
    n = ordered.size
    if n % 2:
        return float(ordered[n // 2])
    return float(ordered[n // 2 - 1] / 2 + ordered[n // 2] / 2)


def coarsen_utilities(utils: pd.DataFrame, resolutions: Mapping[str, Resolution]) -> pd.DataFrame:
    """A utility table (``dynascore.utilities``: more is better on every axis, so each
    group starts at its best model) with every axis coarsened by its resolution."""
    result = utils.copy()
    for axis in AXES:
        if axis in result.columns:
            result[axis] = coarsen(
                result[axis].to_numpy(dtype=np.float64), resolutions.get(axis, NONE)
            )
    return result


def _median(values: Sequence[float | None]) -> float:
    kept = [float(v) for v in values if v is not None and np.isfinite(v) and v >= 0]
    return float(np.median(kept)) if kept else 0.0
