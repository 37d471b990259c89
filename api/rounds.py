"""A task's rounds and held-out sets, managed by its owner through the API (and by
``dynaeval rounds`` on the local database, through the same functions).

An uploaded set is streamed to a temporary file within a size limit, checked row by row
by the evaluator's own parser, then stored in the blob store under its content hash; the
task's next spec version and the dataset row are written in one transaction. Any failure
stores nothing: a blob this change created is removed. Examples and labels are never
served back."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, TypeVar

from flask import request
from flask.views import MethodView
from flask_smorest import Blueprint
from marshmallow import Schema, ValidationError, fields, validate

from api.auth import principal
from api.docs import error_docs
from api.errors import ApiError
from api.routes import service, task_or_404
from api.schemas import FullMatch, OpenSchema
from api.service import Service
from configs.schema import TaskSpec
from evaluator.inputs.datasets import DatasetError, check_file, file_digest
from evaluator.tasks import RoundError, TaskCatalog, put_dataset, put_weight
from store.collection import Collection
from store.refusals import Refused
from store.tasks import NewDataset, StoredDataset

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
    413: "dataset_too_large (the limit is in the message), request_entity_too_large",
    422: "invalid_dataset (names the line and the problem), invalid_round or a field out of "
    "range; nothing is stored",
}
errors = error_docs(blp, ERRORS)
ROUND_NAME = FullMatch(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", error="a short name: letters, "
                       "digits, '_', '-', '.'")  # fmt: skip
WEIGHT = fields.Float(validate=validate.Range(min=0, min_inclusive=False), allow_nan=False)
_STATUS = {
    "unknown_round": 404,
    "round_exists": 409,
    "concurrent_change": 409,
    "invalid_round": 422,
}


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


# -- the change, shared with the CLI ---------------------------------------------------------
class RoundRefused(Refused):
    """A round or dataset change refused (see store.refusals)."""


@dataclass(frozen=True)
class Upload:
    """A held-out set on its way in: where it goes and what it is."""

    round: str
    dataset: str
    stream: IO[bytes]
    filename: str
    weight: float | None = None  # a new round's weight (None: 1.0)
    new_round: bool = False  # POST .../rounds: the round must not exist yet


@dataclass(frozen=True)
class Change:
    """What a change did: the task version now current, and whether it created anything."""

    task: str
    task_version: int
    created: bool
    round: dict[str, Any]
    dataset: dict[str, Any] | None
    backfill_jobs: tuple[str, ...] = ()  # one per model scored before the change

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "backfill_jobs": list(self.backfill_jobs)}


def add_dataset(svc: Service, task: TaskSpec, upload: Upload) -> Change:
    """Validate ``upload`` against ``task``, store it by content hash and write the task's
    next version (none when the same content is there already)."""
    catalog = _catalog(svc)
    with tempfile.TemporaryDirectory(prefix="dynaeval-dataset-") as folder:
        path = Path(folder) / "data.jsonl"
        _receive(upload.stream, path, svc.max_dataset_bytes)
        try:
            digest = check_file(task, path, _shown_name(upload.filename))
        except DatasetError as exc:
            raise RoundRefused(422, "invalid_dataset", str(exc)) from None
        key = f"datasets/{digest.sha256}.jsonl"
        created_blob = not svc.blobs.exists(key)
        new = NewDataset(upload.round, upload.dataset, digest.sha256, key, digest.examples)
        created = False
        try:
            if created_blob:
                with path.open("rb") as source:
                    svc.blobs.put_file(key, source)
            _, created = put_dataset(
                catalog, task.name, new, new_round=upload.new_round, weight=upload.weight
            )
        except RoundError as exc:
            raise RoundRefused(_STATUS[exc.code], exc.code, exc.message) from None
        finally:  # content-addressed: removed only when no recorded set refers to it
            if created_blob and not created and not catalog.versions.blob_in_use(key):
                svc.blobs.delete(key)
    change = _change(svc, task.name, upload.round, upload.dataset, created)
    if not created:
        return change
    return replace(change, backfill_jobs=tuple(svc.rescore_stale([task.name])))


def set_weight(svc: Service, task: TaskSpec, round_name: str, weight: float) -> Change:
    """Change a round's weight (a new task version; none when it is that weight already)."""
    try:
        _, created = put_weight(_catalog(svc), task.name, round_name, weight)
    except RoundError as exc:
        raise RoundRefused(_STATUS[exc.code], exc.code, exc.message) from None
    return _change(svc, task.name, round_name, None, created)


def rounds_of(svc: Service, task: TaskSpec) -> list[dict[str, Any]]:
    """Each round with its weight and its sets' hashes, sizes and versions (no examples)."""
    records = svc.catalog.versions.datasets(task.name) if svc.catalog else []
    frozen = Collection(svc.db).frozen_sets(task.name)
    identities = svc.dataset_hashes(task.name)
    rounds = []
    for spec in task.rounds:
        infos = [
            _dataset_info(svc, task, spec.name, d.name, d.path, records) for d in spec.datasets
        ]
        for info in infos:  # both identities, so one maps to the other
            info["dataset_hash"] = identities.get(f"{spec.name}/{info['name']}")
        for info in infos:  # a set a freeze wrote says so
            if frozen.get(spec.name) == info["sha256"] and info["source"] == "upload":
                info["source"] = "collected"
        rounds.append({"name": spec.name, "weight": spec.weight, "datasets": infos})
    return rounds


def _change(
    svc: Service, task_name: str, round_name: str, dataset: str | None, created: bool
) -> Change:
    """The change as answered; a new version also updates the tasks table."""
    task = _catalog(svc).get(task_name)
    assert task is not None
    if created:
        svc.store.register_task(task.name, task.version, task.public_dict())
    info = next(r for r in rounds_of(svc, task) if r["name"] == round_name)
    shown = next((d for d in info["datasets"] if d["name"] == dataset), None)
    return Change(task_name, task.version, created, info, shown)


def _dataset_info(
    svc: Service,
    task: TaskSpec,
    round_name: str,
    name: str,
    path: str,
    records: list[StoredDataset],
) -> dict[str, Any]:
    digest = file_digest(task, svc.config_dir / path)
    found = [r for r in records if (r.round, r.name, r.sha256) == (round_name, name, digest.sha256)]
    record = found[-1] if found else None
    return {
        "name": name,
        "sha256": digest.sha256,
        "examples": digest.examples,
        "version": record.version if record else 1,
        "added_at": record.added_at.isoformat() + "Z" if record else None,
        "source": "upload" if record else "file",
    }


def _catalog(svc: Service) -> TaskCatalog:
    if svc.catalog is None:
        raise RoundRefused(409, "read_only_tasks", "this service's tasks come from files only")
    return svc.catalog


def _shown_name(filename: str) -> str:
    """The upload's file name as its errors quote it: the last part, printable, short."""
    name = "".join(c for c in Path(filename or "").name if c.isprintable())[:100]
    return name or "upload"


def _receive(stream: IO[bytes], path: Path, limit: int) -> None:
    """Copy ``stream`` to ``path`` a chunk at a time, refusing more than ``limit`` bytes."""
    size = 0
    with path.open("wb") as out:
        while chunk := stream.read(1 << 16):
            size += len(chunk)
            if size > limit:
                raise RoundRefused(
                    413, "dataset_too_large", f"a dataset is limited to {limit} bytes"
                )
            out.write(chunk)
    if size == 0:
        raise RoundRefused(422, "invalid_dataset", "the uploaded dataset is empty")


# -- routes ----------------------------------------------------------------------------------


def owned_task(task_name: str) -> TaskSpec:
    """The task, if the caller may change it (outsiders of a private task get a 404)."""
    task = task_or_404(task_name)
    who = principal()
    if not (who.is_admin or task.name in who.owned_tasks):
        raise ApiError(403, "not_task_owner", "only the task's owner or an admin changes rounds")
    return task


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


def _run(action: Callable[[], Change]) -> tuple[dict[str, Any], int]:
    try:
        return _answer(action())
    except RoundRefused as exc:
        raise ApiError(exc.status, exc.code, exc.message) from None


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
        return _run(lambda: add_dataset(service(), task, new))


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
    return _run(lambda: add_dataset(service(), task, new))


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
    answer, _ = _run(lambda: set_weight(service(), task, round_name, body_weight))
    return answer, 200
