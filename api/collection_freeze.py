"""Freezing a collection round over HTTP (``usecases.collection.freezing`` does it)."""

from __future__ import annotations

from typing import Any

from marshmallow import fields

from api.bodies import Blueprint
from api.context import owned_task, service
from api.docs import error_docs
from api.rounds import ChangeSchema
from usecases.collection.freezing import freeze

blp = Blueprint(
    "freezing", __name__, url_prefix="/api/v1", description="Freezing a collection round"
)
errors = error_docs(
    blp,
    {
        401: "no credentials, or an unknown, expired or revoked token",
        403: "not the task's owner or an admin, or a token without the submit scope",
        404: "no such task (or not yours to see), or a round that was never collected",
        409: "round_frozen, nothing_validated, too_few_validated (under the round's "
        "min_frozen_examples) or concurrent_change",
        413: "the frozen set is over the dataset size limit",
        422: "a validated example does not fit the task's fields and labels",
    },
)


class FreezeSchema(ChangeSchema):
    frozen_examples = fields.Integer(metadata={"description": "validated examples frozen"})
    dropped_examples = fields.Dict(
        keys=fields.String(), values=fields.Integer(),
        metadata={"description": "the round's examples left out, by why: `unsettled` (fooled "
                  "a model, no verdict yet), `rejected` (judged incorrect or flagged), "
                  "`did_not_fool` (never up for validation)"},
    )  # fmt: skip


@blp.route("/tasks/<task_name>/rounds/<round_name>/freeze", methods=["POST"])
@blp.alt_response(201, schema=FreezeSchema, success=True)
@blp.alt_response(200, schema=FreezeSchema, description="the same examples were frozen before")
@errors(401, 403, 404, 409, 413, 422)
def post_freeze(task_name: str, round_name: str) -> tuple[dict[str, Any], int]:
    """Freeze a collection round (task owner or admin): its validated examples become the
    round's `collected` dataset (a new task version), and every scored model is queued to
    be scored on it, below new submissions (`backfill_jobs`)."""
    task = owned_task(task_name)
    frozen = freeze(service(), task, round_name)
    return frozen.to_dict(), 201 if frozen.change.created else 200
