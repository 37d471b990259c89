"""A task's rounds and held-out sets over HTTP: the owner's routes parse the request and
call ``usecases.rounds`` (which ``dynaeval rounds`` calls too)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flask import request
from flask.views import MethodView
from marshmallow import Schema, ValidationError, fields, validate

from api.bodies import Blueprint
from api.context import owned_task, service, task_or_404
from api.docs import error_docs
from api.errors import ApiError
from api.schemas import FullMatch, OpenSchema
from usecases.rounds import Change, Upload, add_dataset, rounds_of, set_weight

blp = Blueprint(
    "rounds", __name__, url_prefix="/api/v1", description="A task's rounds and datasets"
)
F = TypeVar("F", bound=Callable[..., Any])
ERRORS = {
    400: "bad_request (a body that is not a readable form or JSON object)",
    401: "unauthenticated (no or unknown credentials), token_expired or token_revoked",
    403: "not_task_owner (only the task's owner or an admin), insufficient_scope or "
    "cross_site_refused",
    404: "unknown_task (also a private task's, to outsiders) or unknown_round",
    409: "round_exists, concurrent_change or read_only_tasks",
    413: "dataset_too_large (the limit is in the message), body_too_large",
    422: "invalid_dataset (names the line and the problem), invalid_round or a field out of "
    "range; nothing is stored",
}
errors = error_docs(blp, ERRORS)
ROUND_NAME = FullMatch(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", error="a short name: letters, "
                       "digits, '_', '-', '.'")  # fmt: skip
WEIGHT = fields.Float(validate=validate.Range(min=0, min_inclusive=False), allow_nan=False)


# -- schemas ---------------------------------------------------------------------------------
class DatasetFormSchema(Schema):
    dataset = fields.String(load_default="test", validate=ROUND_NAME)


class RoundFormSchema(DatasetFormSchema):
    name = fields.String(required=True, validate=ROUND_NAME)
    weight = WEIGHT


class RoundPatchSchema(Schema):
    weight = fields.Float(
        required=True,
        validate=validate.Range(min=0, min_inclusive=False),
        allow_nan=False,
        # OpenAPI 3.0: a boolean beside minimum (apispec documents only "minimum: 0")
        metadata={"exclusiveMinimum": True, "description": "the round's weight, > 0"},
    )


_FILE = fields.Raw(
    required=True,
    metadata={"type": "string", "format": "binary", "description": "JSONL, one example a line"},
)


class RoundUploadSchema(RoundFormSchema):
    data = _FILE


class DatasetUploadSchema(DatasetFormSchema):
    data = _FILE


class DatasetInfoSchema(OpenSchema):
    name = fields.String()
    sha256 = fields.String(
        metadata={"description": "of the JSONL file's bytes (what the blob store keeps)"}
    )
    dataset_hash = fields.String(
        metadata={"description": "the set's identity in results: provenance.dataset_hashes, "
                  "score keys and backfill scopes name it by this (of its parsed examples)"}
    )  # fmt: skip
    examples = fields.Integer()
    version = fields.Integer(metadata={"description": "1 for the first content of this name"})
    added_at = fields.String(allow_none=True, metadata={"description": "null: from the files"})
    source = fields.String(
        metadata={"description": "`file` (configs/), `upload` (API) or `collected` (a freeze)"}
    )


class RoundInfoSchema(OpenSchema):
    name = fields.String()
    weight = fields.Float()
    datasets = fields.List(fields.Nested(DatasetInfoSchema))


class RoundListSchema(OpenSchema):
    task = fields.String()
    task_version = fields.Integer()
    rounds = fields.List(fields.Nested(RoundInfoSchema))


class ChangeSchema(OpenSchema):
    task = fields.String()
    task_version = fields.Integer()
    created = fields.Boolean(metadata={"description": "false: the same content was there"})
    round = fields.Nested(RoundInfoSchema)
    dataset = fields.Nested(DatasetInfoSchema, allow_none=True)
    backfill_jobs = fields.List(
        fields.String(),
        metadata={"description": "jobs queued to score earlier models on the new data"},
    )


def _upload_body(schema: type[Schema]) -> dict[str, Any]:
    return {"required": True, "content": {"multipart/form-data": {"schema": schema}}}


# -- routes ----------------------------------------------------------------------------------


def _form(schema: Schema) -> tuple[dict[str, Any], Any]:
    """The multipart form and its ``data`` file; the first problem is a 422."""
    request.max_content_length = service().max_dataset_bytes + 2**20  # the form around it
    try:
        form: dict[str, Any] = schema.load(request.form)
    except ValidationError as exc:
        field, problem = next(iter(exc.normalized_messages().items()))
        raise ApiError(422, "invalid_dataset", f"{field}: {problem}") from None
    upload = request.files.get("data")
    if upload is None:
        raise ApiError(422, "invalid_dataset", "send the JSONL as a multipart file named 'data'")
    return form, upload


def _answer(change: Change) -> tuple[dict[str, Any], int]:
    return change.to_dict(), 201 if change.created else 200


@blp.route("/tasks/<task_name>/rounds")
class TaskRounds(MethodView):
    @blp.alt_response(200, schema=RoundListSchema, success=True)
    @errors(404)
    def get(self, task_name: str) -> dict[str, Any]:
        """The task's rounds: weight, and per dataset its sha256, size, version and when it
        was added (never its examples)."""
        task = task_or_404(task_name)
        return {
            "task": task.name,
            "task_version": task.version,
            "rounds": rounds_of(service(), task),
        }

    @blp.doc(requestBody=_upload_body(RoundUploadSchema))
    @blp.alt_response(201, schema=ChangeSchema, success=True)
    @blp.alt_response(200, schema=ChangeSchema, description="the same round and content exist")
    @errors(400, 401, 403, 404, 409, 413, 422)
    def post(self, task_name: str) -> tuple[dict[str, Any], int]:
        """Add a round (task owner or admin): multipart `name`, `weight`, `dataset` (default
        `test`) and the JSONL file `data`, checked row by row before anything is stored."""
        task = owned_task(task_name)
        form, upload = _form(RoundFormSchema())
        new = Upload(
            form["name"], form["dataset"], upload.stream, upload.filename or "data.jsonl",
            weight=form.get("weight"), new_round=True,
        )  # fmt: skip
        return _answer(add_dataset(service(), task, new))


@blp.route("/tasks/<task_name>/rounds/<round_name>/datasets", methods=["POST"])
@blp.doc(requestBody=_upload_body(DatasetUploadSchema))
@blp.alt_response(201, schema=ChangeSchema, success=True)
@blp.alt_response(200, schema=ChangeSchema, description="the same content is there: nothing new")
@errors(400, 401, 403, 404, 409, 413, 422)
def post_dataset(task_name: str, round_name: str) -> tuple[dict[str, Any], int]:
    """Add or replace a dataset of a round (task owner or admin): new content under a name
    is its next version; the same content again creates nothing."""
    task = owned_task(task_name)
    form, upload = _form(DatasetFormSchema())
    new = Upload(round_name, form["dataset"], upload.stream, upload.filename or "data.jsonl")
    return _answer(add_dataset(service(), task, new))


@blp.route("/tasks/<task_name>/rounds/<round_name>", methods=["PATCH"])
@blp.arguments(RoundPatchSchema)
@blp.alt_response(200, schema=ChangeSchema, success=True)
@errors(400, 401, 403, 404, 409, 422)
def patch_round(
    body: dict[str, Any], task_name: str, round_name: str
) -> tuple[dict[str, Any], int]:
    """Change a round's weight (task owner or admin)."""
    task = owned_task(task_name)
    body_weight = float(body["weight"])
    answer, _ = _answer(set_weight(service(), task, round_name, body_weight))
    return answer, 200
