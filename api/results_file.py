"""A submission's full results as one file: the summary axes, every round, and every score
under its full key, as JSON or as one long CSV table (``section`` says which part a row is).

The content is what the model page shows (``usecases.boards.public.model_results``: provenance
trimmed to its public runtime fields); failures and log tails stay in the API."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from marshmallow import fields

from api.schemas import OpenSchema
from usecases.boards.public import SCORE_COLUMNS

# Summary and round rows name their number by a dotted path (``performance_ci.0``) in
# ``name``; score rows fill the key columns instead.
CSV_COLUMNS = ("model_id", "task", "section", "name", *SCORE_COLUMNS)
SECTIONS = ("summary", "round", "score")


class ResultsFileSchema(OpenSchema):
    """A submission's full results as a JSON file."""

    id = fields.String()
    task = fields.String()
    name = fields.String()
    created_at = fields.String()
    runtime = fields.Dict()
    image_id = fields.String(allow_none=True)
    results = fields.Dict(
        metadata={"description": "the five axes, rounds, slices, profile, provenance"}
    )
    scores = fields.List(fields.Dict(), metadata={"description": "every score, full key"})


def results_json(model: dict[str, Any]) -> str:
    """Everything as one JSON document: id, task, name, results (summary axes, rounds,
    slices, profile, provenance) and scores."""
    return json.dumps(model, indent=2, sort_keys=False)


def results_csv(model: dict[str, Any]) -> str:
    """Every number as one row: the summary's, each round's, then every score's."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in _rows(model):
        writer.writerow([_cell(row.get(column)) for column in CSV_COLUMNS])
    return out.getvalue()


def _rows(model: dict[str, Any]) -> Iterator[dict[str, Any]]:
    base = {"model_id": model["id"], "task": model["task"]}
    results = model.get("results") or {}
    summary = {k: v for k, v in results.items() if k not in ("rounds", "slices", "profile")}
    summary.pop("provenance", None)  # names and hashes, not numbers: in the JSON file
    for name, value in _leaves(summary):
        yield base | {"section": "summary", "name": name, "value": value}
    for entry in results.get("rounds") or []:
        round_name = entry.get("round")
        rest = {k: v for k, v in entry.items() if k != "round"}
        for name, value in _leaves(rest):
            yield base | {"section": "round", "round": round_name, "name": name, "value": value}
    for score in model.get("scores") or []:
        yield base | {"section": "score"} | score


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Scalar leaves of nested dicts and lists with their dotted paths (None is skipped:
    an interval that was not computed has no row)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _leaves(inner, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for index, inner in enumerate(value):
            yield from _leaves(inner, f"{path}.{index}")
    elif value is not None:
        yield path, value


def _cell(value: Any) -> Any:
    return "" if value is None else value
