"""Creating a task over HTTP: ``POST /api/v1/tasks`` (an admin, or an author) with a spec
and its datasets as one multipart request; ``usecases.tasks`` checks and stores it (and
``dynaeval tasks create`` calls the same use case)."""

from __future__ import annotations

from typing import Any

from flask import request
from marshmallow import Schema, fields

from api.auth import principal
from api.bodies import Blueprint
from api.context import service
from api.docs import error_docs
from api.errors import ApiError
from api.rounds import RoundInfoSchema
from api.schemas import TaskSchema
from usecases.tasks import MAX_SPEC_BYTES, DatasetFile, create_task

blp = Blueprint("task_creation", __name__, url_prefix="/api/v1", description="Creating tasks")
ERRORS = {
    400: "bad_request (a body that is not a readable multipart form)",
    401: "unauthenticated, token_expired or token_revoked",
    403: "may_not_create_tasks (admins and authors only), insufficient_scope or cross_site_refused",
    409: "task_exists or read_only_tasks",
    413: "dataset_too_large or spec_too_large (the limit is in the message)",
    422: "invalid_spec (names the field), invalid_dataset (names the file and line); "
    "nothing is stored",
}
errors = error_docs(blp, ERRORS)
DATA_PREFIX = "data/"


class TaskFormSchema(Schema):
    spec = fields.String(
        required=True,
        metadata={"description": "the task spec as YAML or JSON (the keys of a task file; "
                  "datasets are named, never given a path)"},
    )  # fmt: skip
    data_round = fields.Raw(
        data_key="data/<round>[/<dataset>]",
        metadata={"type": "string", "format": "binary",
                  "description": "one JSONL file per dataset, under the field `data/<round>` "
                  "(dataset `test`) or `data/<round>/<dataset>`"},
    )  # fmt: skip


class CreatedTaskSchema(TaskSchema):
    rounds = fields.List(fields.Nested(RoundInfoSchema))


@blp.route("/tasks", methods=["POST"])
@blp.doc(
    requestBody={"required": True, "content": {"multipart/form-data": {"schema": TaskFormSchema}}}
)
@blp.alt_response(201, schema=CreatedTaskSchema, success=True)
@errors(400, 401, 403, 409, 413, 422)
def post_task() -> tuple[dict[str, Any], int]:
    """Create a task (an admin, or an author): multipart `spec` (YAML or JSON) and one JSONL
    file per dataset, each checked row by row before anything is stored; the caller owns the
    task, and it is listed at once."""
    who = principal()
    if not who.may_create_tasks:
        raise ApiError(403, "may_not_create_tasks", "only admins and authors create tasks")
    if request.mimetype != "multipart/form-data":
        raise ApiError(400, "bad_request", "send a multipart/form-data form: spec and data files")
    svc = service()
    request.max_content_length = 16 * svc.max_dataset_bytes + MAX_SPEC_BYTES + 2**20
    spec = request.form.get("spec")
    if spec is not None and not _was_utf8(spec):
        raise ApiError(422, "invalid_spec", "spec: not UTF-8 text")
    if spec is None:
        upload = request.files.get("spec")
        spec = _utf8(upload.stream.read(MAX_SPEC_BYTES + 1)) if upload else None
    if spec is None:
        raise ApiError(422, "invalid_spec", "spec: send the task spec as the form field 'spec'")
    files = [_dataset_file(field, upload) for field, upload in request.files.items(multi=True)
             if field != "spec"]  # fmt: skip
    return create_task(svc, spec, files, who.name), 201


def _was_utf8(text: str) -> bool:
    """False where the form decoder met bytes that are not UTF-8 (kept as surrogates, or
    replaced by U+FFFD, by werkzeug's versions)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\ufffd" not in text


def _utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(422, "invalid_spec", "spec: not UTF-8 text") from None


def _dataset_file(field: str, upload: Any) -> DatasetFile:
    if not field.startswith(DATA_PREFIX):
        raise ApiError(422, "invalid_dataset", f"{field}: files go under data/<round>[/<dataset>]")
    parts = field[len(DATA_PREFIX) :].split("/")
    if len(parts) > 2 or not all(parts):
        raise ApiError(422, "invalid_dataset", f"{field}: files go under data/<round>[/<dataset>]")
    dataset = parts[1] if len(parts) == 2 else "test"
    return DatasetFile(parts[0], dataset, upload.stream, upload.filename or "data.jsonl")
