"""Downloads: a leaderboard under any weights and a model's full scores, as CSV or JSON.

Documented in the OpenAPI document beside the v1 routes (same prefix). The leaderboard
is the API's computation (``usecases.boards.leaderboard``), with the page's optional round weights.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from typing import Any

from flask import Response
from marshmallow import Schema, fields, validate

from api.bodies import Blueprint
from api.context import service, task_visible
from api.errors import ApiError
from api.pages.visibility import model_visible
from api.schemas import ErrorSchema, ScoresSchema, WeightsQuerySchema
from api.schemas_board import LeaderboardSchema
from configs.vocabulary.axes import AXES
from usecases.boards import assemble as boards
from usecases.boards import public
from usecases.boards.default_view import task_defaults
from usecases.boards.page import board as weighted_board

downloads = Blueprint(
    "downloads",
    __name__,
    url_prefix="/api/v1",
    description="Leaderboards and scores as CSV or JSON files",
)
FORMAT = fields.String(
    load_default="csv",
    validate=validate.OneOf(["csv", "json"]),
    metadata={"description": "csv (default) or json"},
)


def file_response(schema: type[Schema]) -> dict[str, Any]:
    """A 200 documented in both formats a download comes in."""
    return {
        "200": {
            "description": "an attachment: CSV (format=csv, the default) or JSON (format=json)",
            "content": {
                "text/csv": {"schema": {"type": "string"}},
                "application/json": {"schema": schema},
            },
        }
    }


class LeaderboardDownloadQuerySchema(WeightsQuerySchema):
    rounds = fields.String(
        metadata={"description": "round:weight pairs (default: the task's round weights)"}
    )
    format = FORMAT


class ScoresDownloadQuerySchema(Schema):
    format = FORMAT


class LeaderboardFileSchema(LeaderboardSchema):
    """The leaderboard as a JSON file: the API's body plus the round weights used and
    whether the Dynascore is defined."""

    round_weights = fields.Dict(keys=fields.String(), values=fields.Float())
    dynascore_defined = fields.Boolean()
    undefined_reason = fields.String()


class ScoresFileSchema(ScoresSchema):
    """A model's scores as a JSON file."""

    task = fields.String()
    name = fields.String()


@downloads.route("/tasks/<task_name>/leaderboard/download")
@downloads.arguments(LeaderboardDownloadQuerySchema, location="query", as_kwargs=True)
@downloads.doc(responses=file_response(LeaderboardFileSchema))
@downloads.alt_response(400, schema=ErrorSchema, description="bad_weights")
@downloads.alt_response(404, schema=ErrorSchema, description="unknown_task")
@downloads.alt_response(422, schema=ErrorSchema, description="a query field out of range")
def leaderboard_download(
    task_name: str,
    weights: str | None = None,
    rounds: str | None = None,
    instance_memory: float | None = None,
    format: str = "csv",
) -> Response:
    """The leaderboard under these weights as a file; an undefined Dynascore is left empty
    in CSV (``dynascore_defined`` says so in JSON)."""
    found = service().tasks.get(task_name)
    if found is None or not task_visible(task_name):
        raise ApiError(404, "unknown_task", f"no task {task_name!r}")
    defaults = task_defaults(service(), found)  # what the page and the API show unweighted
    task = defaults.task
    try:
        chosen = boards.axis_weights(task, weights)
        round_weights = boards.requested_round_weights(
            task, defaults.round_weights, rounds, weights
        )
    except boards.BadWeights as exc:
        raise ApiError(400, "bad_weights", str(exc)) from None
    board = weighted_board(service(), task, chosen, round_weights, instance_memory)
    name = f"{task.name}-leaderboard"
    if format == "json":
        return _attachment(json.dumps(board, indent=2), "application/json", f"{name}.json")
    return _attachment(leaderboard_csv(board), "text/csv", f"{name}.csv")


def leaderboard_csv(board: Mapping[str, Any]) -> str:
    """One row per model (ranked first, then unranked with the reason)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    rounds = board["rounds"]
    # the metrics reported beside the task's own (BLEU beside chrF++), in the order found
    beside = list(dict.fromkeys(k for m in board["models"] for k in (m.get("secondary") or {})))
    writer.writerow(
        [
            "rank",
            "rank_low",
            "rank_high",
            "model_id",
            "name",
            "score",
            "dynascore",
            *AXES,
            "performance_ci_low",
            "performance_ci_high",
            *(f"{metric}{col}" for metric in beside for col in ("", "_ci_low", "_ci_high")),
            "memory_peak",
            *(f"{axis}_units" for axis in AXES),
            *(f"{r}_{col}" for r in rounds for col in ("performance", "ci_low", "ci_high")),
            "partial",
            "not_scored_on",
            "throughput_mode",
            "conditions",
            "unranked_reason",
        ]
    )
    for m in board["models"]:
        ci = m.get("performance_ci") or [None, None]
        by_round = {r["round"]: r for r in m.get("rounds") or []}
        low, high = m.get("rank_interval") or [None, None]
        cells: list[Any] = [
            m["rank"],
            low,
            high,
            m["model_id"],
            m["name"],
            m["score"] if board["dynascore_defined"] else None,
            m["dynascore"] if board["dynascore_defined"] else None,
            *(m.get(axis) for axis in AXES),
            *ci,
            *_beside(m, beside),
            m.get("memory_peak"),
            *(m["units"].get(axis) for axis in AXES),
        ]
        for r in rounds:
            found = by_round.get(r) or {}
            low, high = found.get("performance_ci") or [None, None]
            cells += [found.get("performance"), low, high]
        cells += [m.get("partial", False), " ".join(m.get("not_scored_on") or [])]
        cells += [m.get("throughput_mode"), m.get("conditions"), None]
        writer.writerow(["" if c is None else c for c in cells])
    width = 7 + len(AXES) * 2 + 3 + 3 * len(beside) + len(rounds) * 3  # rank .. the rounds
    for u in board["unranked"]:
        blanks = [""] * (width - 5 + 4)  # the model's columns, then partial .. conditions
        writer.writerow(["", "", "", u["model_id"], u["name"], *blanks, u["reason"]])
    return out.getvalue()


def _beside(model: dict[str, Any], metrics: list[str]) -> list[Any]:
    """Each metric's value and interval, blank where the model has none."""
    values, intervals = model.get("secondary") or {}, model.get("secondary_ci") or {}
    cells: list[Any] = []
    for metric in metrics:
        low, high = intervals.get(metric) or [None, None]
        cells += [values.get(metric), low, high]
    return cells


@downloads.route("/submissions/<model_id>/scores/download")
@downloads.arguments(ScoresDownloadQuerySchema, location="query", as_kwargs=True)
@downloads.doc(responses=file_response(ScoresFileSchema))
@downloads.alt_response(404, schema=ErrorSchema, description="unknown_submission (or not scored)")
@downloads.alt_response(422, schema=ErrorSchema, description="format is not csv or json")
def scores_download(model_id: str, format: str = "csv") -> Response:
    """Every score of a scored model under its full key, as a file."""
    model = public.model_results(service(), model_id)
    if model is None or not model_visible(model_id):
        raise ApiError(404, "unknown_submission", f"no scored submission {model_id!r}")
    name = f"{model['task']}-{model_id}-scores"
    if format == "json":
        body = {
            "id": model_id,
            "task": model["task"],
            "name": model["name"],
            "scores": model["scores"],
        }
        return _attachment(json.dumps(body, indent=2), "application/json", f"{name}.json")
    return _attachment(public.scores_csv(model), "text/csv", f"{name}.csv")


def _attachment(text: str, mimetype: str, filename: str) -> Response:
    response = Response(text, mimetype=mimetype)
    response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
