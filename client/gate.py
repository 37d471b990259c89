"""The CI gate's vocabulary: the exit codes of ``dynaeval submit --wait`` and its
``--fail-under`` thresholds (an ``argparse`` type). Light on purpose: the parser imports it,
and ``dynaeval --help`` must not load the HTTP client to describe a flag."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

EXIT_PASS, EXIT_BELOW, EXIT_FAILED, EXIT_USAGE = 0, 1, 2, 3
# What --fail-under can gate on: higher is better for each (memory is not: it is refused),
# but ``rank``, which passes at that rank or better. ``dynascore`` gates on the board's
# readable 0-100 score (the raw Dynascore moves with every submission to the board).
GATE_METRICS = ("performance", "robustness", "fairness", "throughput", "dynascore", "rank")
BOARD_METRICS = ("dynascore", "rank")


@dataclass(frozen=True)
class Threshold:
    """``metric=value``: the gate passes when the metric is at least ``value`` (a rank:
    at most ``value``, since rank 1 is the best)."""

    metric: str
    value: float

    def __str__(self) -> str:
        return f"{self.metric}={self.value:g}"

    def passes(self, number: float) -> bool:
        return number <= self.value if self.metric == "rank" else number >= self.value


def parse_thresholds(text: str) -> list[Threshold]:
    """``80`` (performance, as before), ``dynascore=0``, ``performance=80,robustness=70``;
    an ``argparse`` type (bad input is a usage error)."""
    found = []
    for part in (p.strip() for p in text.split(",")):
        metric, sep, number = part.rpartition("=") if "=" in part else ("", "", part)
        metric = metric.strip().lower() if sep else "performance"
        if metric not in GATE_METRICS:
            hint = " (lower is better: it cannot be a floor)" if metric == "memory" else ""
            raise argparse.ArgumentTypeError(
                f"{part!r}: gate on one of {', '.join(GATE_METRICS)}{hint}, as METRIC=VALUE"
            )
        try:
            value = float(number)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{part!r}: the threshold must be a finite number")
        _check_range(part, metric, value)
        found.append(Threshold(metric, value))
    return found


def _check_range(part: str, metric: str, value: float) -> None:
    """Refuse a threshold that cannot fail or cannot pass: a gate must mean something."""
    if metric == "dynascore" and not 0 < value <= 100:
        raise argparse.ArgumentTypeError(
            f"{part!r}: dynascore gates on the board's 0-100 score (100: its best model, 0: "
            "its worst), so give a number above 0 and at most 100; or gate on rank=N"
        )
    if metric == "rank" and (value < 1 or value != int(value)):
        raise argparse.ArgumentTypeError(f"{part!r}: a rank is a whole number from 1 (the best)")
