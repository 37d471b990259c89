"""REST API v1: tasks, submissions, results, leaderboards."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from flask import current_app, request, url_for
from flask.views import MethodView
from flask_smorest import Blueprint
from marshmallow import Schema, ValidationError

from api.errors import ApiError
from api.leaderboard import leaderboard, viewer_weights
from api.schemas import (
    SUBMIT_REQUEST_BODY,
    ErrorSchema,
    HealthSchema,
    LeaderboardQuerySchema,
    LeaderboardSchema,
    ScoresSchema,
    SubmissionListQuerySchema,
    SubmissionListSchema,
    SubmissionSchema,
    SubmitFormSchema,
    SubmitJsonSchema,
    SubmittedSchema,
    TaskListSchema,
    TaskSchema,
    TaskSubmissionListQuerySchema,
)
from api.service import Service
from api.submissions import (
    SubmissionRefused,
    Submitted,
    UploadTooLarge,
    submit_runtime,
    submit_upload,
)
from configs.schema import TaskSpec

MAX_JSON_BYTES = 64 * 1024

blp = Blueprint("v1", __name__, url_prefix="/api/v1", description="Dynaeval API v1")
F = TypeVar("F", bound=Callable[..., Any])
ERRORS = {
    400: "bad_json (the body is not a JSON object) or bad_weights",
    403: "runtime_not_allowed: this server takes only docker submissions",
    404: "unknown_task or unknown_submission",
    413: "image_too_large (an upload over the image limit) or body_too_large (a JSON body over 64 KiB)",
    422: "invalid_submission, image_not_loadable or a query/form field out of range",
}


def errors(*statuses: int) -> Callable[[F], F]:
    """Document the error responses a route can give, each with the Error schema."""

    def decorate(func: F) -> F:
        for status in statuses:
            func = blp.alt_response(status, schema=ErrorSchema, description=ERRORS[status])(func)
        return func

    return decorate


def ok(schema: type, status: int = 200) -> Callable[[F], F]:
    """Document the success body without re-serialising what the view returns."""
    return blp.alt_response(status, schema=schema, success=True)


def service() -> Service:
    return current_app.extensions["dynaeval"]


def task_or_404(name: str) -> TaskSpec:
    task = service().tasks.get(name)
    if task is None:
        known = ", ".join(sorted(service().tasks))
        raise ApiError(404, "unknown_task", f"no task {name!r} (tasks: {known})")
    return task


@blp.route("/health")
@ok(HealthSchema)
def health() -> dict[str, Any]:
    """Liveness and queue counts."""
    return {"status": "ok", "jobs": service().queries.job_counts()}


@blp.route("/tasks")
@ok(TaskListSchema)
def list_tasks() -> dict[str, Any]:
    """Every task with its fields, labels, rounds, limits and default weights."""
    return {"tasks": [task.public_dict() for task in service().tasks.values()]}


@blp.route("/tasks/<task_name>")
@ok(TaskSchema)
@errors(404)
def get_task(task_name: str) -> dict[str, Any]:
    """One task's definition (limits are shown before anyone submits)."""
    return task_or_404(task_name).public_dict()


@blp.route("/tasks/<task_name>/leaderboard")
@ok(LeaderboardSchema)
@errors(400, 404, 422)
@blp.arguments(LeaderboardQuerySchema, location="query", as_kwargs=True)
def get_leaderboard(
    task_name: str, weights: str | None = None, instance_memory: float | None = None
) -> dict[str, Any]:
    """Models ranked by Dynascore under the viewer's weights."""
    task = task_or_404(task_name)
    try:
        chosen = viewer_weights(task, weights)
    except ValueError as exc:
        raise ApiError(400, "bad_weights", str(exc)) from None
    rows = service().queries.leaderboard_rows(task.name)
    return leaderboard(
        task, rows, chosen, instance_memory, current_hashes=service().dataset_hashes(task.name)
    )


@blp.route("/tasks/<task_name>/submissions")
class Submissions(MethodView):
    @ok(SubmissionListSchema)
    @errors(404, 422)
    @blp.arguments(TaskSubmissionListQuerySchema, location="query", as_kwargs=True)
    def get(self, task_name: str, limit: int = 100) -> dict[str, Any]:
        """Submissions to a task, newest first."""
        task_or_404(task_name)
        return {"submissions": service().queries.submissions(task_name, limit)}

    @blp.response(201, SubmittedSchema)
    @errors(400, 403, 404, 413, 422)
    @blp.doc(
        description="Submit a model: JSON {name, runtime: {kind: docker, image: <registry "
        "reference>, protocol}} or multipart/form-data with an `image` file (a `docker save` "
        "tarball), `name` and `protocol`.",
        requestBody=SUBMIT_REQUEST_BODY,
    )
    def post(self, task_name: str) -> dict[str, Any]:
        """Submit a model for evaluation; returns the queued submission."""
        task = task_or_404(task_name)
        try:
            if request.mimetype == "multipart/form-data":
                submitted = _upload_submission(task)
            else:
                submitted = _json_submission(task)
        except SubmissionRefused as exc:
            raise _refusal(exc) from None
        return {
            "id": submitted.model_id,
            "job_id": submitted.job_id,
            "task": task.name,
            "name": submitted.name,
            "status": "queued",
            "url": url_for("v1.get_submission", model_id=submitted.model_id),
        }


def _json_submission(task: TaskSpec) -> Submitted:
    """A JSON submission: a registry reference, or a local runtime where the server allows."""
    data = _load(SubmitJsonSchema(), _json_body())
    runtime = data["runtime"]
    if runtime["kind"] != "docker" and not service().allow_local_runtimes:
        raise ApiError(
            403,
            "runtime_not_allowed",
            f"this server accepts only docker submissions, not {runtime['kind']!r}",
        )
    return submit_runtime(service(), task, data["name"], runtime)


def _upload_submission(task: TaskSpec) -> Submitted:
    """A multipart submission: ``name``, ``protocol`` and the ``image`` tarball."""
    form = _load(SubmitFormSchema(), request.form)
    upload = request.files.get("image")
    if upload is None:
        raise ApiError(422, "invalid_submission", "multipart uploads need an 'image' file")
    return submit_upload(
        service(),
        task,
        form["name"],
        upload.stream,
        filename=upload.filename,
        protocol=form["protocol"],
    )


def _json_body() -> dict[str, Any]:
    """The request's JSON object, read only when it is small."""
    # Only uploads may be large: a JSON submission is a few hundred bytes, and Flask
    # reads a JSON body into memory whole.
    request.max_content_length = MAX_JSON_BYTES
    if (request.content_length or 0) > MAX_JSON_BYTES:
        raise ApiError(413, "body_too_large", f"a JSON body is limited to {MAX_JSON_BYTES} bytes")
    try:
        payload = request.get_json(silent=True)
    except RecursionError:  # nesting deep enough to exhaust the decoder is not JSON we take
        payload = None
    if not isinstance(payload, dict):
        raise ApiError(400, "bad_json", "the body must be a JSON object")
    return payload


def _load(schema: Schema, data: Mapping[str, Any]) -> dict[str, Any]:
    """The request data as ``schema`` loads it; its first problem is a 422."""
    try:
        loaded: dict[str, Any] = schema.load(data)
    except ValidationError as exc:
        field, problem = next(iter(exc.normalized_messages().items()))
        raise ApiError(422, "invalid_submission", f"{field}: {problem}") from None
    return loaded


def _refusal(exc: SubmissionRefused) -> ApiError:
    """An upload over the image limit is a body too large (413); other refusals are 422."""
    return ApiError(413 if isinstance(exc, UploadTooLarge) else 422, exc.code, exc.message)


@blp.route("/submissions/<model_id>")
@ok(SubmissionSchema)
@errors(404)
def get_submission(model_id: str) -> dict[str, Any]:
    """Status, progress, failure (code, message, log tail) and results of a submission."""
    found = service().queries.submission(model_id)
    if found is None:
        raise ApiError(404, "unknown_submission", f"no submission {model_id!r}")
    return found


@blp.route("/submissions/<model_id>/scores")
@ok(ScoresSchema)
@errors(404)
def get_scores(model_id: str) -> dict[str, Any]:
    """Every score of a submission under its full key (round, dataset hash, variant, slice)."""
    found = service().queries.submission(model_id, with_scores=True)
    if found is None:
        raise ApiError(404, "unknown_submission", f"no submission {model_id!r}")
    return {"id": model_id, "scores": found.get("scores", [])}


@blp.route("/submissions")
@ok(SubmissionListSchema)
@errors(404, 422)
@blp.arguments(SubmissionListQuerySchema, location="query", as_kwargs=True)
def list_submissions(task: str | None = None, limit: int = 100) -> dict[str, Any]:
    """Submissions across tasks, newest first."""
    if task is not None:
        task_or_404(task)
    return {"submissions": service().queries.submissions(task, limit)}
