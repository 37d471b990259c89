"""REST API v1: tasks, submissions, results, leaderboards."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeVar

from flask import Flask, Response, current_app, request, url_for
from flask.views import MethodView
from marshmallow import Schema, ValidationError

from api.auth import principal
from api.bodies import Blueprint
from api.context import service, task_or_404, task_visible
from api.docs import error_docs, success_docs
from api.errors import ApiError
from api.pages.downloads import ScoresDownloadQuerySchema, file_response
from api.pages.visibility import readable_submission
from api.results_file import ResultsFileSchema, results_csv, results_json
from api.schemas import (
    LEADERBOARD_PAGE,
    SUBMIT_REQUEST_BODY,
    CancelledSchema,
    HealthSchema,
    LeaderboardQuerySchema,
    QuotaSchema,
    ReadySchema,
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
from api.schemas_board import ComparisonSchema, LeaderboardSchema
from configs.schema import TaskSpec
from configs.vocabulary.boards import Leaderboard
from configs.vocabulary.capabilities import BadRequirements, Requirements
from configs.vocabulary.idempotency import IDEMPOTENCY_HEADER, IDEMPOTENCY_KEY
from configs.vocabulary.refusals import Refused
from evaluator.transport.dialects import DEFAULT_DIALECT
from store.idempotency import DuplicateSubmission, KeyedSubmission, find_by_key
from store.queries import CursorError
from store.stats import TaskQueue, task_queues
from usecases.boards.cache import boards_ready
from usecases.boards.public import model_results
from usecases.boards.viewing import board_for_viewer
from usecases.compare import compare
from usecases.evaluations import cancel
from usecases.quotas import quota_admission, quota_state
from usecases.submissions import (
    Admission,
    SubmissionRefused,
    Submitted,
    UploadTooLarge,
    server_addresses,
    submit_runtime,
    submit_upload,
)
from usecases.uploads import submit_uploaded, upload_blob_key

MAX_JSON_BYTES = 64 * 1024

blp = Blueprint("v1", __name__, url_prefix="/api/v1", description="Dynaeval API v1")
F = TypeVar("F", bound=Callable[..., Any])
ERRORS = {
    400: "bad_json (the body is not a JSON object), bad_weights or bad_cursor",
    401: "unauthenticated (no or unknown credentials), token_expired or token_revoked",
    403: "insufficient_scope, cross_site_refused, or runtime_not_allowed (local runtimes are "
    "off, or on for admins only)",
    404: "unknown_task, unknown_submission or unknown_upload (also for objects the caller may "
    "not see)",
    409: "not_comparable or no_predictions: the two submissions cannot be compared (yet); "
    "already_final: the submission's job has ended (nothing to cancel); upload_incomplete "
    "(parts missing, listed), upload_submitted or upload_busy: the upload cannot be submitted",
    413: "image_too_large (an upload over the image limit, or a tarball that unpacks to more) "
    "or body_too_large (a JSON body over 64 KiB)",
    422: "invalid_submission, image_not_loadable or a query/form field out of range",
    429: "quota_exceeded (the task's daily or total submission quota is used up; the message "
    "names which and when the daily one resets) or rate_limited (too many writes: retry "
    "after the seconds in Retry-After)",
    503: "not_ready (the leaderboards are still being prepared after a start; retry after "
    "the seconds in Retry-After), stopping (serve was asked to stop and drains) or "
    "database_unavailable",
}
READY_RETRY_AFTER_S = 1
STOPPING = "DYNAEVAL_STOPPING"  # app.config: set once serve has been asked to stop


def begin_stopping(app: Flask) -> None:
    """From now on ``/ready`` answers 503 ``stopping`` (``serve``'s drain)."""
    app.config[STOPPING] = True


errors = error_docs(blp, ERRORS)


ok = success_docs(blp)


def submission_or_404(
    model_id: str, *, with_scores: bool = False, with_queue: bool = False
) -> dict[str, Any]:
    """A submission the caller may read: theirs to see, or published (then without its
    failure and log tail); any other id, guessed or not, is the same 404. ``with_queue``
    adds a queued job's place and estimated start."""
    return readable_submission(model_id, with_scores=with_scores, with_queue=with_queue)


@blp.route("/health")
@ok(HealthSchema)
def health() -> dict[str, Any]:
    """Liveness and queue counts."""
    return {"status": "ok", "jobs": service().queries.job_counts()}


@blp.route("/ready")
@ok(ReadySchema)
@errors(503)
def ready() -> dict[str, Any]:
    """Readiness, for a load balancer or an orchestrator (liveness is ``/health``): 200
    once the database answers and, after a ``serve`` start, every task's leaderboard has
    been prepared (a board that fails for another reason than an outage does not hold it
    back), so the first viewer sent here gets a prepared board; 503 ``not_ready`` until
    then."""
    if current_app.config.get(STOPPING):
        raise _unready("stopping", "this server is stopping: send new requests to another")
    service().queries.ping()  # an outage answers 503 database_unavailable
    if not boards_ready(service()):
        raise _unready(
            "not_ready",
            "the leaderboards are still being prepared after the start; try again shortly",
        )
    return {"status": "ready"}


def _unready(code: str, message: str) -> ApiError:
    """``/ready``'s 503, asking the prober back in ``READY_RETRY_AFTER_S``."""
    return ApiError(503, code, message, {"Retry-After": str(READY_RETRY_AFTER_S)})


@blp.route("/tasks")
@ok(TaskListSchema)
def list_tasks() -> dict[str, Any]:
    """Every task the caller may see with its fields, labels, rounds, limits and weights,
    and its queue: jobs queued and running, and the oldest ready job's wait in seconds."""
    tasks = [t for name, t in service().tasks.items() if task_visible(name)]
    queues = task_queues(service().db, service().clock.now())
    return {
        "tasks": [
            task.public_dict() | {"queue": queues.get(task.name, TaskQueue()).to_dict()}
            for task in tasks
        ]
    }


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
    task_name: str,
    weights: str | None = None,
    rounds: str | None = None,
    instance_memory: float | None = None,
    limit: int = LEADERBOARD_PAGE,
    offset: int = 0,
) -> Leaderboard:
    """Models ranked by Dynascore under the viewer's weights (axes not named keep the
    task's default view's weights, or the task's own when it has none), a page at a time:
    ``limit`` models from rank position ``offset`` (``total_models`` says how many)."""
    task = task_or_404(task_name)
    try:
        # the weights as the page and the downloads read them: each named first, then
        # the OpenAPI pattern exactly (usecases.boards.viewer_weights)
        return board_for_viewer(
            service(), task, weights, rounds, instance_memory, offset=offset, limit=limit
        )
    except ValueError as exc:
        raise ApiError(400, "bad_weights", str(exc)) from None


@blp.route("/tasks/<task_name>/submissions")
class Submissions(MethodView):
    @ok(SubmissionListSchema)
    @errors(400, 401, 403, 404, 422)
    @blp.arguments(TaskSubmissionListQuerySchema, location="query", as_kwargs=True)
    def get(
        self,
        task_name: str,
        limit: int = 100,
        cursor: str | None = None,
        include: str | None = None,
    ) -> dict[str, Any]:
        """The caller's submissions to a task (a task owner's: all of them), newest first,
        a page at a time (``next_cursor``); ``fields`` picks what each one carries."""
        task_or_404(task_name)
        return _submission_page(task_name, limit, cursor, include)

    @blp.response(201, SubmittedSchema)
    @errors(400, 401, 403, 404, 409, 413, 422, 429)
    @blp.doc(
        description="Submit a model: JSON {name, runtime: {kind: docker, image: <registry "
        "reference>, protocol}}, JSON {name, upload: <a complete resumable upload's id>, "
        "protocol} (for images of gigabytes: see /tasks/{task_name}/uploads), or "
        "multipart/form-data with an `image` file (a `docker save` tarball), `name` and "
        "`protocol`.",
        requestBody=SUBMIT_REQUEST_BODY,
        parameters=[
            {
                "in": "header",
                "name": IDEMPOTENCY_HEADER,
                "required": False,
                "schema": {"type": "string", "pattern": IDEMPOTENCY_KEY.pattern, "maxLength": 128},
                "description": "a key of the client's (a UUID): a repeat by the same submitter "
                "answers 200 with the first submission instead of making another",
            }
        ],
    )
    @blp.alt_response(200, schema=SubmittedSchema, description="a replay of a submission made")
    def post(self, task_name: str) -> dict[str, Any] | tuple[dict[str, Any], int]:
        """Submit a model for evaluation; returns the queued submission. With an
        ``Idempotency-Key`` header (the CLI and SDK send one), a repeat of a submission
        already made answers 200 with the first one, ``replayed: true``: nothing is stored
        or charged twice, so a client that timed out may simply retry."""
        task = task_or_404(task_name)
        key = idempotency_key()
        first = _made_by(key)
        if first is not None:  # before the quota and the upload's checks: it costs nothing
            return _replayed(first, task, _requested_name())
        try:
            refusal = quota_state(service(), task, principal()).refusal()
            if refusal is not None:  # before the body is read: nothing is stored
                raise refusal
            # checked again under a lock around the insert: concurrent ones passed above
            admit = partial(quota_admission, service(), task, principal())
            if request.mimetype == "multipart/form-data":
                submitted = _upload_submission(task, admit, key)
            else:
                submitted = _json_submission(task, admit, key)
        except SubmissionRefused as exc:
            raise _refusal(exc) from None
        except DuplicateSubmission as exc:  # the same key raced us to the insert
            return _replayed(exc.first, task, _requested_name())
        except Refused as exc:
            # a retry while its first request was still being checked: that one may have
            # taken the last of the quota (or the upload) meanwhile, and then it is the answer
            first = _made_by(key)
            retry_of_first = exc.kind == "too_many" or exc.code == "upload_submitted"
            if not retry_of_first or first is None:
                raise
            return _replayed(first, task, _requested_name())
        return _submitted_body(task, submitted.model_id, submitted.job_id, submitted.name)


@blp.route("/tasks/<task_name>/quota")
@ok(QuotaSchema)
@errors(401, 403, 404)
def get_quota(task_name: str) -> dict[str, Any]:
    """How many submissions the caller has left on a task, today (with when the day resets,
    midnight UTC) and in total; admins are exempt. Only what the submitter caused counts."""
    return quota_state(service(), task_or_404(task_name), principal()).to_dict()


def idempotency_key() -> str | None:
    """The request's ``Idempotency-Key`` header: 1-128 of A-Z a-z 0-9 . _ : - (422 else)."""
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is None:
        return None
    if not IDEMPOTENCY_KEY.match(key):
        raise ApiError(
            422,
            "invalid_idempotency_key",
            f"{IDEMPOTENCY_HEADER} must be 1-128 of A-Z a-z 0-9 . _ : - (a UUID will do)",
        )
    return key


def _made_by(key: str | None) -> KeyedSubmission | None:
    """The submission the caller already made with ``key``, if any."""
    return find_by_key(service().db, principal().user_id, key) if key else None


def _requested_name() -> str | None:
    """The submission name the request asks for (JSON or multipart), if it gives one."""
    if request.mimetype == "multipart/form-data":
        return request.form.get("name")
    name = _json_body().get("name")
    return name if isinstance(name, str) else None


def _requested_upload() -> str | None:
    """The resumable upload a JSON submission names, if it names one."""
    if request.mimetype == "multipart/form-data":
        return None
    upload = _json_body().get("upload")
    return upload if isinstance(upload, str) else None


def _requested_requirements() -> dict[str, Any]:
    """The requirements the request asks for, as stored ({}: none); 422 if bad."""
    if request.mimetype == "multipart/form-data":
        asked = _requirements(request.form.get("requirements"))
    else:
        asked = _requirements(_json_body().get("requirements"), text=False)
    return asked.to_dict() if asked else {}


def _replayed(
    first: KeyedSubmission, task: TaskSpec, name: str | None
) -> tuple[dict[str, Any], int]:
    """The first submission of a key, if this request asks for the same one (the same
    task, name and requirements, and the same upload when it names one): other
    requirements were answered with the first submission, silently ignored."""
    upload = _requested_upload()
    other_upload = upload is not None and first.blob != upload_blob_key(upload)
    other_needs = _requested_requirements() != Requirements.parse(first.requirements).to_dict()
    if (
        first.task != task.name
        or (name is not None and name != first.name)
        or other_upload
        or other_needs
    ):
        raise ApiError(
            422,
            "idempotency_key_reused",
            f"this {IDEMPOTENCY_HEADER} made submission {first.name!r} to task "
            f"{first.task!r}"
            + (" with other requirements" if other_needs else "")
            + "; use a new key for a new submission",
        )
    body = _submitted_body(task, first.model_id, first.job_id, first.name, first.status)
    return body | {"replayed": True}, 200


def _submitted_body(
    task: TaskSpec, model_id: str, job_id: str | None, name: str, status: str = "queued"
) -> dict[str, Any]:
    return {
        "id": model_id,
        "job_id": job_id,
        "task": task.name,
        "name": name,
        "status": status,
        "url": url_for("v1.get_submission", model_id=model_id),
        "quota": quota_state(service(), task, principal()).to_dict(),
    }


def _json_submission(task: TaskSpec, admit: Admission, key: str | None = None) -> Submitted:
    """A JSON submission: a registry reference, or a local runtime where the server allows."""
    data = _load(SubmitJsonSchema(), _json_body())
    if "upload" in data:
        return submit_uploaded(
            service(),
            task,
            principal(),
            data["name"],
            data["upload"],
            protocol=data.get("protocol", DEFAULT_DIALECT),
            admit=admit,
            idempotency_key=key,
            published=data.get("publish", task.publish_results),
            requirements=_requirements(data.get("requirements"), text=False),
        )
    runtime = data["runtime"]
    # A local runtime runs the submitter's command on the server: admins only, when allowed.
    local_ok = service().allow_local_runtimes and principal().is_admin
    if runtime["kind"] != "docker" and not local_ok:
        raise ApiError(
            403,
            "runtime_not_allowed",
            f"this server accepts only docker submissions, not {runtime['kind']!r}",
        )
    own = server_addresses(request.environ, request.host, request.scheme)
    return submit_runtime(
        service(),
        task,
        data["name"],
        runtime,
        own_addresses=own,
        owner_id=principal().user_id,
        admit=admit,
        idempotency_key=key,
        published=data.get("publish", task.publish_results),
        requirements=_requirements(data.get("requirements"), text=False),
    )


def _requirements(raw: Any, *, text: bool = True) -> Requirements | None:
    """A submission's requirements: an object in JSON, its JSON ``text`` in a form; 422
    ``invalid_requirements`` if bad."""
    if raw is None:
        return None
    try:
        return Requirements.parse(json.loads(raw) if text and isinstance(raw, str) else raw)
    except (BadRequirements, ValueError) as exc:
        raise ApiError(422, "invalid_requirements", f"requirements: {exc}") from None
    except RecursionError:  # JSON text nested a thousand deep
        raise ApiError(422, "invalid_requirements", "requirements: nested too deeply") from None


def _upload_submission(task: TaskSpec, admit: Admission, key: str | None = None) -> Submitted:
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
        owner_id=principal().user_id,
        admit=admit,
        idempotency_key=key,
        published=form.get("publish", task.publish_results),
        requirements=_requirements(form.get("requirements")),
    )


def _json_body() -> dict[str, Any]:
    """The request's JSON object, read only when it is small."""
    # Only uploads may be large: a JSON submission is a few hundred bytes, and Flask
    # reads a JSON body into memory whole.
    # A chunked body has no Content-Length and the stream stops quietly at the limit, so
    # one byte more is read to tell "too large" (413) from "exactly the limit".
    request.max_content_length = MAX_JSON_BYTES + 1
    too_large = ApiError(413, "body_too_large", f"a JSON body is limited to {MAX_JSON_BYTES} bytes")
    if (request.content_length or 0) > MAX_JSON_BYTES:
        raise too_large
    data = request.get_data(cache=True)
    if len(data) > MAX_JSON_BYTES:
        raise too_large
    try:
        payload = current_app.json.loads(data) if request.is_json else None
    except (ValueError, RecursionError):  # not JSON, or nested deep enough to exhaust it
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
    """An image over the limit, as uploaded or as it unpacks, is a body too large (413: one
    status per code, as documented); other refusals are 422."""
    too_large = isinstance(exc, UploadTooLarge) or exc.code == "image_too_large"
    return ApiError(413 if too_large else 422, exc.code, exc.message)


@blp.route("/submissions/<model_id>")
@ok(SubmissionSchema)
@errors(404)
def get_submission(model_id: str) -> dict[str, Any]:
    """Status, progress (``step``), a queued job's place and estimated start (``queue``),
    failure (code, message, log tail) and results of a submission. A published one is
    public, without its failure and log tail (those stay with who may see the submission)."""
    return submission_or_404(model_id, with_queue=True)


@blp.route("/submissions/<model_id>/cancel", methods=["POST"])
@ok(CancelledSchema)
@errors(401, 403, 404, 409)
def cancel_submission(model_id: str) -> dict[str, Any]:
    """Stop a submission's evaluation (its submitter, its task's owner or an admin): a
    queued job ends at once; a running one ends now and its worker stops at its next step.
    It fails with code ``cancelled``, which is never retried nor counted against anyone."""
    done = cancel(service(), principal(), model_id)
    return {"id": model_id, "job_id": done.job_id, "status": "failed", "was": done.was}


@blp.route("/submissions/<model_id>/results/download")
@blp.doc(responses=file_response(ResultsFileSchema))
@errors(401, 403, 404, 422)
@blp.arguments(ScoresDownloadQuerySchema, location="query", as_kwargs=True)
def results_download(model_id: str, format: str = "csv") -> Response:
    """A scored submission's full results as a file: summary axes, every round and every
    score under its full key (JSON: also slices, profile, provenance)."""
    submission_or_404(model_id)  # the caller must be allowed to see it
    model = model_results(service(), model_id)
    if model is None:
        raise ApiError(404, "unknown_submission", f"submission {model_id!r} has no results yet")
    name = f"{model['task']}-{model_id}-results"
    if format == "json":
        return _attachment(results_json(model), "application/json", f"{name}.json")
    return _attachment(results_csv(model), "text/csv", f"{name}.csv")


def _attachment(text: str, mimetype: str, filename: str) -> Response:
    response = Response(text, mimetype=mimetype)
    response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@blp.route("/submissions/<model_id>/scores")
@ok(ScoresSchema)
@errors(404)
def get_scores(model_id: str) -> dict[str, Any]:
    """Every score of a submission under its full key (round, dataset hash, variant, slice)."""
    found = submission_or_404(model_id, with_scores=True)
    return {"id": model_id, "scores": found.get("scores", [])}


@blp.route("/submissions/<model_id>/compare/<other_id>")
@ok(ComparisonSchema)
@errors(401, 403, 404, 409)
def get_comparison(model_id: str, other_id: str) -> dict[str, Any]:
    """``model_id`` minus ``other_id`` on the task metric over the same held-out examples,
    with a paired-bootstrap 95 % interval (computed here: labels never leave the server)."""
    submission_or_404(model_id)  # both must be the caller's to see
    submission_or_404(other_id)
    return compare(service(), model_id, other_id)


@blp.route("/submissions")
@ok(SubmissionListSchema)
@errors(400, 401, 403, 404, 422)
@blp.arguments(SubmissionListQuerySchema, location="query", as_kwargs=True)
def list_submissions(
    task: str | None = None,
    limit: int = 100,
    cursor: str | None = None,
    include: str | None = None,
) -> dict[str, Any]:
    """The submissions the caller may see across tasks, newest first, a page at a time:
    pass ``next_cursor`` as ``?cursor=`` for the next (null on the last page). ``fields``
    (e.g. ``id,name,job``) picks what each one carries: a CI job polling a thousand
    submissions need not read their results."""
    if task is not None:
        task_or_404(task)
    return _submission_page(task, limit, cursor, include)


def _submission_page(
    task: str | None, limit: int, cursor: str | None, fields: str | None = None
) -> dict[str, Any]:
    """The list body: the page in ``submissions`` (the shape older clients read) and
    ``next_cursor`` beside it."""
    chosen = fields.split(",") if fields else None
    try:
        page = service().queries.submission_page(task, limit, principal(), cursor, chosen)
    except CursorError as exc:
        raise ApiError(400, "bad_cursor", str(exc)) from None
    return {"submissions": page.items, "next_cursor": page.next_cursor}
