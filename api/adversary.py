"""The automated adversary through the API: a task owner starts a run on a round open for
collection; the worker searches perturbations of the round's seeds that fool the round's
best in-the-loop models (evaluator.adversary) and puts what it finds in the round's
validation queue, marked machine-proposed with the models it fools.

Seeds are the owner's own examples sent with the run and the examples already written in
the round, never held-out data: validators see every proposal and a freeze copies them into
a test set, so a proposal made from a held-out row would show that row to the world."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, fields, validate

from api.bodies import Blueprint
from api.context import owned_task, service, task_or_404
from api.docs import error_docs
from api.schemas import OpenSchema
from evaluator.adversary import OPERATORS, AdversarySettings
from store.adversary import AdversaryRuns, AdversaryRunState
from usecases.adversary import AdversaryRequest, start_run

blp = Blueprint("adversary", __name__, url_prefix="/api/v1", description="The automated adversary")
errors = error_docs(
    blp,
    {
        401: "no credentials, or an unknown, expired or revoked token",
        403: "not the task's owner or an admin, or a token without the submit scope",
        404: "no such task (or not yours to see), or a round never opened for collection",
        409: "round_not_open, no_healthy_model, attack_running, or no_sources (no seeds "
        "sent and no example written in the round)",
        422: "a setting out of range",
    },
)
_PATH = "/tasks/<task_name>/rounds/<round_name>/adversary"
MAX_SEEDS = 1000
DEFAULTS = AdversarySettings()


class AttackRequestSchema(Schema):
    """An adversary run's settings; anything else is 422 (marshmallow refuses unknown
    fields by default)."""

    seed = fields.Integer(
        load_default=DEFAULTS.seed, validate=validate.Range(0, 2**31 - 1),
        metadata={"description": "the same seed, models and data give the same proposals"},
    )  # fmt: skip
    max_queries = fields.Integer(
        load_default=DEFAULTS.max_queries, validate=validate.Range(1, 100_000),
        metadata={"description": "model queries at most (one example to one model is one)"},
    )  # fmt: skip
    edit_budget = fields.Integer(
        load_default=DEFAULTS.edit_budget, validate=validate.Range(1, 20),
        metadata={"description": "word edits at most between a proposal and its source"},
    )  # fmt: skip
    candidates_per_source = fields.Integer(
        load_default=DEFAULTS.candidates_per_source, validate=validate.Range(1, 100)
    )
    max_proposals = fields.Integer(
        load_default=DEFAULTS.max_proposals, validate=validate.Range(1, 10_000)
    )
    operators = fields.List(
        fields.String(validate=validate.OneOf(OPERATORS)),
        load_default=list(DEFAULTS.operators), validate=validate.Length(min=1, max=len(OPERATORS)),
        metadata={"description": "the word substitutions to try (name swaps join them on "
                  "tasks with fairness perturbations)"},
    )  # fmt: skip
    seeds = fields.List(
        fields.Dict(), load_default=list, validate=validate.Length(max=MAX_SEEDS),
        metadata={"description": "the owner's own examples to start from, each written as a "
                  "collected example is ({inputs, label} or {inputs, answer, answer_start}); "
                  "the round's written examples join them. Held-out data is never used."},
    )  # fmt: skip
    top_models = fields.Integer(
        load_default=2, validate=validate.Range(1, 8),
        metadata={"description": "attack the round's best healthy in-the-loop models, by "
                  "their newest performance"},
    )  # fmt: skip


class AttackRunSchema(OpenSchema):
    job_id = fields.String()
    task = fields.String()
    round = fields.String()
    status = fields.String(metadata={"description": "queued, running, done or failed"})
    stage = fields.String()
    spec = fields.Dict(metadata={"description": "the attack's settings and target models"})
    checkpoint = fields.Dict(
        metadata={"description": "progress: next_source, queries_used, proposals and, once "
                  "done, stopped_because"}
    )  # fmt: skip
    created_at = fields.String()
    failure = fields.String(allow_none=True)


class AttackRunListSchema(OpenSchema):
    runs = fields.List(fields.Nested(AttackRunSchema))


def runs() -> AdversaryRuns:
    return AdversaryRuns(service().db, service().clock)


def shown(run: AdversaryRunState) -> dict[str, Any]:
    checkpoint = run.checkpoint.to_dict() if run.checkpoint else {}
    return {
        **run.__dict__,
        "checkpoint": checkpoint,
        "created_at": run.created_at.isoformat() + "Z",
    }


@blp.route(_PATH, methods=["POST"])
@blp.arguments(AttackRequestSchema)
@blp.response(202, AttackRunSchema)
@errors(401, 403, 404, 409, 422)
def post_attack(body: dict[str, Any], task_name: str, round_name: str) -> dict[str, Any]:
    """Start an adversary run on a round open for collection (task owner or admin). It runs
    on a worker, below new submissions; its proposals join the round's validation queue."""
    task = owned_task(task_name)
    options = dict(body)
    request = AdversaryRequest(options, tuple(options.pop("seeds")), options.pop("top_models"))
    return shown(start_run(service(), task, round_name, request))


@blp.route(_PATH, methods=["GET"])
@blp.response(200, AttackRunListSchema)
@errors(404)
def list_attacks(task_name: str, round_name: str) -> dict[str, Any]:
    """A round's adversary runs, newest first, with their progress."""
    task = task_or_404(task_name)
    return {"runs": [shown(run) for run in runs().runs(task.name, round_name)]}
