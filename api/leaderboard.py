"""A task's leaderboard: the Dynascore over every model's newest result, re-weighted."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from configs.schema import TaskSpec
from configs.vocabulary.axes import AXES
from dynascore.dynascore import compute
from dynascore.weights import Weights


def viewer_weights(task: TaskSpec, text: str | None) -> Weights:
    """The task's default weights, overridden by the axes the viewer names."""
    if not text:
        return Weights(dict(task.weights))
    parsed = Weights.parse(text)  # validates: unknown axis, not a number, negative
    named = {part.partition(":")[0].strip().lower() for part in text.split(",") if part.strip()}
    return Weights({**task.weights, **{axis: parsed.values[axis] for axis in named}})


def leaderboard(
    task: TaskSpec,
    rows: list[dict[str, Any]],
    weights: Weights,
    instance_memory_gib: float | None = None,
    current_hashes: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Ranked models with their axes, units and per-round breakdown. With the task's
    ``current_hashes``, a model scored on other data is marked partial (it is re-scored)."""
    memory = instance_memory_gib or task.instance_memory_gib
    complete = [row for row in rows if all(_finite(row.get(axis)) for axis in AXES)]
    incomplete = [row for row in rows if row not in complete]
    ranked: list[dict[str, Any]] = []
    attrs: Mapping[str, Any] = {}
    if complete:
        table = pd.DataFrame(
            [{axis: float(row[axis]) for axis in AXES} for row in complete],
            index=[row["model_id"] for row in complete],
        )
        scored = compute(table, weights, instance_memory_gib=memory)
        attrs = scored.attrs
        by_id = {row["model_id"]: row for row in complete}
        for model_id, line in scored.iterrows():
            ranked.append(_entry(by_id[str(model_id)], line, current_hashes))
    return {
        "task": task.name,
        "metric": task.metric,
        "weights": weights.to_dict(),
        "instance_memory_gib": memory,
        "amrs": _clean(dict(attrs.get("amrs", {}))) if attrs else {},
        "models": ranked,
        "unranked": [
            {
                "model_id": row["model_id"],
                "name": row["name"],
                "reason": "missing axes: " + ", ".join(a for a in AXES if not _finite(row.get(a))),
            }
            for row in incomplete
        ],
        "rounds": [r.name for r in task.rounds],
    }


def _entry(
    row: dict[str, Any], line: pd.Series, current_hashes: dict[str, str] | None
) -> dict[str, Any]:
    entry = {
        "rank": int(line["rank"]),
        "model_id": row["model_id"],
        "name": row["name"],
        "dynascore": round(float(line["dynascore"]), 6),
        **{axis: row[axis] for axis in AXES},
        "memory_peak": row.get("memory_peak"),
        "units": _clean({axis: line[f"{axis}_units"] for axis in AXES}),
        "rounds": [
            {
                "round": r["round"],
                "performance": r["performance"],
                "performance_ci": r.get("performance_ci"),
            }
            for r in row.get("rounds", [])
        ],
        "performance_ci": row.get("performance_ci"),
    }
    if current_hashes is not None:
        scored_on = row.get("dataset_hashes") or {}
        stale = sorted(k for k, v in current_hashes.items() if scored_on.get(k) != v)
        entry["partial"] = bool(stale)
        entry["not_scored_on"] = stale
    return entry


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _clean(values: Mapping[str, Any]) -> dict[str, float | None]:
    return {k: (float(v) if _finite(v) else None) for k, v in values.items()}
