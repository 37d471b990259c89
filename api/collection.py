"""Collection (issue #17): a task's owner opens a round with in-the-loop models; signed-in
writers submit examples and see at once whether they fooled the live model.

The live model receives only the example's input fields, never the intended output. A
model that fails is marked unhealthy for the round and the example is kept unanswered;
later writes go to the next healthy model (store/collection.py explains the choice).
Written examples are future held-out data: their author and the task's owners see them,
nobody else. A private task's rounds answer 404 to outsiders."""

from __future__ import annotations

import re
from typing import Any

from flask import Response

from api.auth import principal
from api.bodies import Blueprint
from api.collection_schemas import (
    CollectionSchema,
    ExampleBodySchema,
    ExampleListSchema,
    ExampleQuerySchema,
    ExportLineSchema,
    OpenBodySchema,
    WrittenSchema,
)
from api.context import owned_task, service, task_or_404
from api.docs import error_docs, success_docs
from api.errors import ApiError, from_refusal
from configs.schema import TaskSpec
from store.collection import (
    Collection,
    CollectionRefused,
    RoundState,
    Settings,
    StoredExample,
)
from usecases.collection.freezing import export_lines
from usecases.collection.writing import round_state, stop_round_models, write_example

blp = Blueprint("collection", __name__, url_prefix="/api/v1", description="Collection")
ERRORS = {
    400: "bad_request: the body is not valid JSON",
    401: "unauthenticated (no or unknown credentials), token_expired or token_revoked",
    403: "not_task_owner (opening and closing are the task owner's or an admin's), "
    "insufficient_scope or cross_site_refused",
    404: "unknown_task (also a private task's, to outsiders) or unknown_round (not opened "
    "for collection)",
    409: "collection_open (already open), round_frozen or round_not_open (closed or frozen: "
    "no writes)",
    422: "invalid_round, invalid_models (names the model that is not a scored submission of the task), "
    "invalid_example (names the field and the problem; nothing is stored) or a field out "
    "of range",
    429: "rate_limited: too many writes (per user, or per user and round as the round's "
    "writes_per_hour allows); retry after the seconds in Retry-After",
}
errors = error_docs(blp, ERRORS)
ok = success_docs(blp)
_PATH = "/tasks/<task_name>/rounds/<round_name>"
_ROUND_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def collection() -> Collection:
    return Collection(service().db, service().clock)


def _refused(exc: CollectionRefused) -> ApiError:
    return from_refusal(exc)


def _state_or_404(task: TaskSpec, round_name: str) -> RoundState:
    try:
        return round_state(service(), task, round_name)
    except CollectionRefused as exc:
        raise _refused(exc) from None


def shown(state: RoundState) -> dict[str, Any]:
    """The round as the API shows it (no examples)."""
    return {
        "task": state.task,
        "round": state.round,
        "status": state.status,
        "opened_at": state.opened_at.isoformat() + "Z",
        "models": [
            {"id": m.id, "name": m.name, "healthy": m.unhealthy is None, "reason": m.unhealthy}
            for m in state.models
        ],
        "settings": state.settings.to_dict(),
        "counts": dict(state.counts),
    }


def _example(example: StoredExample) -> dict[str, Any]:
    return {
        "id": example.id,
        "author": example.author_id,
        "inputs": example.inputs,
        "intended": example.intended,
        "explanation": example.explanation,
        "slices": dict(example.slices),
        "model_id": example.model_id,
        "model_answer": example.model_answer,
        "fooled": example.fooled,
        "answer_error": example.answer_error,
        "verdict": example.verdict,
        "created_at": example.created_at.isoformat() + "Z",
    }


# -- routes ----------------------------------------------------------------------------------
@blp.route(f"{_PATH}/collection", methods=["POST"])
@blp.arguments(OpenBodySchema)
@ok(CollectionSchema, 201)
@errors(400, 401, 403, 404, 409, 422)
def open_collection(
    body: dict[str, Any], task_name: str, round_name: str
) -> tuple[dict[str, Any], int]:
    """Open a round for collection (task owner or admin) with its in-the-loop models:
    scored submissions of the task. Reopening a closed round resets every model's health."""
    task = owned_task(task_name)
    if not _ROUND_NAME.fullmatch(round_name):
        raise ApiError(422, "invalid_round", "a round name is letters, digits, '_', '-', '.'")
    settings = Settings(**body.get("settings", {}))
    who = principal()
    try:
        state = collection().open(task.name, round_name, body["model_ids"], settings, who.user_id)
    except CollectionRefused as exc:
        raise _refused(exc) from None
    return shown(state), 201


@blp.route(f"{_PATH}/collection", methods=["GET"])
@ok(CollectionSchema)
@errors(404)
def get_collection(task_name: str, round_name: str) -> dict[str, Any]:
    """A round's collection: status, models (healthy, or why not), settings and counts."""
    return shown(_state_or_404(task_or_404(task_name), round_name))


@blp.route(f"{_PATH}/collection/close", methods=["POST"])
@ok(CollectionSchema)
@errors(401, 403, 404, 409)
def close_collection(task_name: str, round_name: str) -> dict[str, Any]:
    """Stop collection on an open round (task owner or admin)."""
    task = owned_task(task_name)
    try:
        state = collection().close(task.name, round_name)
    except CollectionRefused as exc:
        raise _refused(exc) from None
    stop_round_models(service(), state)
    return shown(state)


@blp.route(f"{_PATH}/examples", methods=["POST"])
@blp.arguments(ExampleBodySchema)
@ok(WrittenSchema, 201)
@errors(400, 401, 403, 404, 409, 422, 429)
def post_example(
    body: dict[str, Any], task_name: str, round_name: str
) -> tuple[dict[str, Any], int]:
    """Write an example (input fields plus `label`, or `answer` and `answer_start` for QA);
    the live model answers at once. A failed model leaves the example kept, unanswered."""
    task = task_or_404(task_name)
    try:
        return write_example(service(), task, round_name, body, principal().user_id or ""), 201
    except CollectionRefused as exc:
        raise _refused(exc) from None


@blp.route(f"{_PATH}/examples", methods=["GET"])
@blp.arguments(ExampleQuerySchema, location="query")
@ok(ExampleListSchema)
@errors(404, 422)
def list_examples(query: dict[str, Any], task_name: str, round_name: str) -> dict[str, Any]:
    """Written examples: the caller's own (`mine=true`, or anyone not the task's owner);
    owners and admins see all. Never public: anonymous callers get an empty list."""
    task = task_or_404(task_name)
    _state_or_404(task, round_name)
    who = principal()
    if not who.authenticated:
        return {"examples": []}
    owner = who.is_admin or task.name in who.owned_tasks
    author = who.user_id if query["mine"] or not owner else None
    found = collection().examples(task.name, round_name, author, query["limit"])
    return {"examples": [_example(e) for e in found]}


@blp.route(f"{_PATH}/examples/export", methods=["GET"])
@blp.doc(
    responses={
        "200": {
            "description": "one JSON object per line (JSONL), oldest first, each as "
            "ExportLine: `uid`, the task's input fields, `intended`, `slices` (as written, else "
            "`unspecified`) and `provenance`",
            "content": {"application/x-ndjson": {"schema": ExportLineSchema}},
        }
    }
)
@errors(401, 403, 404)
def export_examples(task_name: str, round_name: str) -> Response:
    """Every example of a collection round with its provenance, as JSONL (the task's owner
    or an admin): the collected data to take elsewhere, whatever its verdict."""
    task = owned_task(task_name)
    _state_or_404(task, round_name)
    rows = collection().every_example(task.name, round_name)
    body = "".join(export_lines(task, rows))
    filename = f"{task.name}-{round_name}-collected.jsonl"
    return Response(
        body,
        mimetype="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
