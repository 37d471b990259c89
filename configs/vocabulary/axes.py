"""The Dynascore axes every layer names: scores, weights, task defaults, leaderboards."""

from __future__ import annotations

AXES: tuple[str, ...] = ("performance", "throughput", "memory", "robustness", "fairness")
