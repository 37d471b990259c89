"""The leaderboard page's board: the API's board for the viewer's weights, one page of its
rows for the server to write, and the data the page's script re-ranks every row from.

At 10,000 models the page must open at once: the prepared board comes from the cache (one
read of the rows per results version), the script's rows are serialised once per prepared
board, and the server writes one page of the table (the script then shows every row, a
window at a time; without a script the reader pages through the ranking)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from configs.schema import TaskSpec
from configs.vocabulary.axes import AXES
from configs.vocabulary.boards import PageBoard
from dynascore.weights import Weights
from usecases.boards.assemble import (
    METRIC_LABELS,
    ROUND_AXES,
    TOLERANCE,
    default_round_weights,
    defined,
    secondary_metrics,
)
from usecases.boards.cache import prepared
from usecases.boards.leaderboard import PreparedBoard, finite_or_none
from usecases.boards.measurement import fingerprint
from usecases.service import Service

PAGE_ROWS = 100  # rows the server writes per page of the ranking


@dataclass(frozen=True)
class RowPage:
    """Which rows of a ranking of ``total`` one page shows (1-based ``number``)."""

    number: int
    pages: int
    start: int
    stop: int
    total: int

    @classmethod
    def of(cls, total: int, asked: int, size: int = PAGE_ROWS) -> RowPage:
        """Page ``asked`` of the ranking, moved into range (past the end: the last page)."""
        pages = max(1, math.ceil(total / size))
        number = min(max(1, asked), pages)
        start = (number - 1) * size
        return cls(number, pages, start, min(total, start + size), total)


def board(
    service: Service,
    task: TaskSpec,
    weights: Weights,
    round_weights: Mapping[str, float],
    instance_memory_gib: float | None = None,
) -> PageBoard:
    """The API's leaderboard for these weights (every model), with whether its Dynascore is
    defined; from the prepared board the API's leaderboard route uses too."""
    result = prepared(service, task, round_weights, instance_memory_gib).render(weights)
    is_defined, reason = defined(result, weights)
    return {
        **result,
        "round_weights": dict(round_weights),
        "dynascore_defined": is_defined,
        "undefined_reason": reason,
    }


@dataclass(frozen=True)
class PageData:
    """What the page's script needs, as JSON: ``fields`` and the models' array, kept apart
    because the array (megabytes at 10,000 models) is written once per prepared board."""

    fields: dict[str, Any]
    models_json: str

    def to_json(self) -> str:
        """The whole object the script reads: ``fields`` with ``models``."""
        head = json.dumps(self.fields, allow_nan=False)
        return (
            head[:-1] + (', "models": ' if self.fields else '"models": ') + self.models_json + "}"
        )


def page_data(
    service: Service,
    task: TaskSpec,
    weights: Weights,
    round_weights: Mapping[str, float],
    instance_memory_gib: float | None = None,
    *,
    openable: frozenset[str],
) -> PageData:
    """What the page's script needs to re-rank exactly like the API: the raw rows in the
    API's input order, the task's defaults and the current weights, and which models the
    viewer may open (their submitter, the task's owner, admins; everyone once published).
    The rows are rolled up under the task's round weights, which the script leaves as they
    are."""
    default = prepared(service, task)
    listed = {row["model_id"] for row in default.source_rows}
    fields = {
        "task": task.name,
        "metric": task.metric,
        "axes": list(AXES),
        "rounds": [spec.name for spec in task.rounds],
        "default_weights": Weights(dict(task.weights)).to_dict(),
        "default_round_weights": default_round_weights(task),
        "weights": weights.to_dict(),
        "round_weights": dict(round_weights),
        "instance_memory_gib": instance_memory_gib or task.instance_memory_gib,
        "tolerance": TOLERANCE,
        "secondary_metrics": list(secondary_metrics(task)),
        "metric_labels": METRIC_LABELS,
        "unmeasured": list(task.unmeasured_axes),  # left out of every Dynascore, as the API
        "resolution": {axis: value.to_dict() for axis, value in default.resolution.items()},
        "openable": sorted(openable & listed),  # whose pages the viewer may open
    }
    return PageData(fields, _models_json(default, service.dataset_hashes(task.name)))


def _models_json(board: PreparedBoard, current: Mapping[str, str]) -> str:
    """The script's rows of ``board`` as a JSON array, made once per prepared board (its
    key holds the results version and the data hashes ``current`` comes from)."""
    made = board.derived.get("page_models_json")
    if made is None:
        models = [_script_row(row, current) for row in board.source_rows]
        made = board.derived["page_models_json"] = json.dumps(models, allow_nan=False)
    return str(made)


def _script_row(row: Mapping[str, Any], current: Mapping[str, str]) -> dict[str, Any]:
    scored_on = row.get("dataset_hashes") or {}
    return {
        "model_id": row["model_id"],
        "name": row["name"],
        **{axis: finite_or_none(row.get(axis)) for axis in AXES},
        "memory_peak": finite_or_none(row.get("memory_peak")),
        "throughput_mode": row.get("throughput_mode"),
        "conditions": fingerprint(row),
        "performance_ci": row.get("performance_ci"),
        # metrics reported beside the task's own (BLEU beside chrF++), with intervals
        "secondary": row.get("secondary") or {},
        "secondary_ci": row.get("secondary_ci") or {},
        "rounds": [
            {
                "round": r.get("round"),
                **{axis: finite_or_none(r.get(axis)) for axis in ROUND_AXES},
                "performance_ci": r.get("performance_ci"),
                "secondary": r.get("secondary") or {},
            }
            for r in row.get("rounds") or []
        ],
        "not_scored_on": sorted(k for k, v in current.items() if scored_on.get(k) != v),
        "image_gone": row.get("image_gone"),  # why new rounds stay unscored
    }
