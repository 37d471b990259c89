"""Validation of collected examples and the round's vMER (issue #17).

Validators judge the examples that fooled a model (and machine proposals): each signed-in
user has a queue per round, never with their own examples. Matching votes settle an
example; its task's owner or an admin may settle it directly. The queue shows inputs,
intended labels and model answers (validators' working data, not public); the vMER route
is public on a visible task and shows aggregates only, never example text. A private
task's rounds and examples answer 404 to outsiders, as ids nobody has."""

from __future__ import annotations

from typing import Any

from api.auth import principal
from api.bodies import Blueprint
from api.context import service, task_or_404
from api.docs import error_docs, success_docs
from api.errors import ApiError, from_refusal
from api.validation_schemas import (
    QueueQuerySchema,
    QueueSchema,
    SettlementSchema,
    VerdictSchema,
    VmerSchema,
    VoteListSchema,
)
from configs.schema import TaskSpec
from store.validation import (
    CollectionRound,
    ExampleRef,
    QueuedExample,
    Settlement,
    Validation,
    ValidationRefused,
)
from usecases.collection.validation import settle, vmer_of, vote

blp = Blueprint(
    "validation",
    __name__,
    url_prefix="/api/v1",
    description="Validating collected examples, and the validated model error rate (vMER)",
)
ERRORS = {
    400: "bad_request: the body is not valid JSON",
    401: "unauthenticated (no or unknown credentials), token_expired or token_revoked",
    403: "own_example (a validator never judges their own), not_task_owner (settling is the "
    "task owner's or an admin's), insufficient_scope or cross_site_refused",
    404: "unknown_task (also a private task's, to outsiders), unknown_round (not open for "
    "collection) or unknown_example (also one the caller may not see)",
    409: "already_voted, already_settled, not_for_validation (it fooled no model) or round_frozen",
    422: "a field out of range (verdict: correct, incorrect or flagged; limit 1-100)",
}
errors = error_docs(blp, ERRORS)
ok = success_docs(blp)


def validation() -> Validation:
    return Validation(service().db, service().clock)


def _iso(moment: Any) -> str | None:
    return moment.isoformat() + "Z" if moment is not None else None


def collection_round_or_404(task: TaskSpec, round_name: str) -> CollectionRound:
    """The task's round as opened for collection (404 ``unknown_round`` otherwise)."""
    found = validation().collection_round(task.name, round_name)
    if found is None:
        raise ApiError(
            404, "unknown_round", f"round {round_name!r} of {task.name!r} was never collected"
        )
    return found


def _example_or_404(example_id: str) -> ExampleRef:
    """The example, if its task is visible to the caller; else the same 404 as a guess."""
    found = validation().example(example_id)
    if found is not None:
        try:
            task_or_404(found.task)
        except ApiError:
            found = None
    if found is None:
        raise ApiError(404, "unknown_example", f"no example {example_id!r}")
    return found


def _may_settle(task: str) -> bool:
    who = principal()
    return who.is_admin or task in who.owned_tasks


def _refused(exc: ValidationRefused) -> ApiError:
    return from_refusal(exc)


def queued_json(example: QueuedExample) -> dict[str, Any]:
    return {
        "id": example.id,
        "origin": example.origin,
        "inputs": dict(example.inputs),
        "intended": dict(example.intended),
        "explanation": example.explanation,
        "model_id": example.model_id,
        "model_answer": dict(example.model_answer) if example.model_answer is not None else None,
        "fooled": example.fooled,
        "fooled_models": list(example.fooled_models),
        "created_at": _iso(example.created_at),
    }


def settlement_json(done: Settlement) -> dict[str, Any]:
    return {
        "example_id": done.example_id,
        "vote_id": done.vote_id,
        "settled": done.verdict is not None,
        "verdict": done.verdict,
        "settled_by": done.settled_by,
        "settled_at": _iso(done.settled_at),
        "votes": dict(done.tally),
    }


# -- routes ----------------------------------------------------------------------------------
@blp.route("/tasks/<task_name>/rounds/<round_name>/validation", methods=["GET"])
@blp.arguments(QueueQuerySchema, location="query", as_kwargs=True)
@ok(QueueSchema)
@errors(401, 403, 404, 422)
def get_queue(task_name: str, round_name: str, limit: int = 20) -> dict[str, Any]:
    """Your validation queue for the round, oldest first: examples that fooled a model (and
    machine proposals), not settled, not yours, not voted on by you (none once frozen)."""
    found = collection_round_or_404(task_or_404(task_name), round_name)
    voter = principal().user_id
    assert voter is not None  # the access level needs a signed-in user
    frozen = found.status == "frozen"  # its verdicts are final: nothing left to judge
    queue = [] if frozen else validation().queue(found.task, found.round, voter, limit)
    return {
        "task": found.task,
        "round": found.round,
        "status": found.status,
        "votes_needed": found.votes_needed,
        "examples": [queued_json(e) for e in queue],
    }


def cast_vote(example_id: str, verdict: str) -> Settlement:
    """The caller's vote on a visible example (shared with the round page's form)."""
    _example_or_404(example_id)
    voter = principal().user_id
    assert voter is not None
    try:
        return vote(service(), example_id, voter, verdict)
    except ValidationRefused as exc:
        raise _refused(exc) from None


@blp.route("/examples/<example_id>/votes", methods=["POST"])
@blp.arguments(VerdictSchema, as_kwargs=True)
@ok(SettlementSchema, 201)
@errors(400, 401, 403, 404, 409, 422)
def post_vote(example_id: str, verdict: str) -> tuple[dict[str, Any], int]:
    """Vote correct, incorrect or flagged on an example you did not write (one vote each;
    `votes_needed` matching votes settle it)."""
    return settlement_json(cast_vote(example_id, verdict)), 201


@blp.route("/examples/<example_id>/settle", methods=["POST"])
@blp.arguments(VerdictSchema, as_kwargs=True)
@ok(SettlementSchema)
@errors(400, 401, 403, 404, 409, 422)
def post_settle(example_id: str, verdict: str) -> dict[str, Any]:
    """Settle an example directly (the task's owner or an admin)."""
    found = _example_or_404(example_id)
    if not _may_settle(found.task):
        raise ApiError(403, "not_task_owner", "only the task's owner or an admin settles directly")
    settler = principal().user_id
    assert settler is not None
    try:
        return settlement_json(settle(service(), example_id, settler, verdict))
    except ValidationRefused as exc:
        raise _refused(exc) from None


@blp.route("/examples/<example_id>/votes", methods=["GET"])
@ok(VoteListSchema)
@errors(401, 403, 404)
def get_votes(example_id: str) -> dict[str, Any]:
    """Every vote on an example (its author, the task's owner and admins; 404 to others)."""
    found = _example_or_404(example_id)
    who = principal()
    if not (_may_settle(found.task) or (who.user_id and who.user_id == found.author_id)):
        raise ApiError(404, "unknown_example", f"no example {example_id!r}")
    votes = validation().votes(example_id)
    return {
        "example_id": example_id,
        "votes": [
            {"id": v.id, "voter": v.voter, "verdict": v.verdict, "created_at": _iso(v.created_at)}
            for v in votes
        ],
    }


@blp.route("/tasks/<task_name>/rounds/<round_name>/vmer", methods=["GET"])
@ok(VmerSchema)
@errors(404)
def get_vmer(task_name: str, round_name: str) -> dict[str, Any]:
    """The round's validated model error rate per origin, per model and per writer:
    validated fooled / submitted; unvalidated fooled examples apart, never counted."""
    return vmer_of(service(), collection_round_or_404(task_or_404(task_name), round_name))
