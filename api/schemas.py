"""Request and response schemas (marshmallow) that also feed the OpenAPI document."""

from __future__ import annotations

from marshmallow import INCLUDE, Schema, fields, validate

from evaluator.transport.dialects import DEFAULT_DIALECT, dialect_choices

NAME = validate.Regexp(
    r"^[A-Za-z0-9][A-Za-z0-9 ._\-]{0,127}$", error="1-128 letters, digits, ' ._-'"
)
PROTOCOL = validate.OneOf(dialect_choices())


# -- requests --------------------------------------------------------------------------------
class RuntimeSchema(Schema):
    kind = fields.String(required=True, validate=validate.OneOf(["docker", "process", "url"]))
    image = fields.String(
        metadata={"description": "docker: a registry reference (name:tag or name@digest)"}
    )
    protocol = fields.String(load_default=DEFAULT_DIALECT, validate=PROTOCOL)
    url = fields.String(metadata={"description": "url: http://host:port of a running model"})
    command = fields.List(fields.String(), metadata={"description": "process: argv"})
    cwd = fields.String()


class SubmitJsonSchema(Schema):
    name = fields.String(required=True, validate=NAME)
    runtime = fields.Nested(RuntimeSchema, required=True)


class SubmitFormSchema(Schema):
    name = fields.String(required=True, validate=NAME)
    protocol = fields.String(load_default=DEFAULT_DIALECT, validate=PROTOCOL)


class SubmitUploadSchema(SubmitFormSchema):
    """The multipart form as documented: ``name``, ``protocol`` and the ``image`` file."""

    image = fields.Raw(
        required=True,
        metadata={
            "type": "string",
            "format": "binary",
            "description": "a `docker save` tarball holding exactly one image",
        },
    )


SUBMIT_REQUEST_BODY = {
    "required": True,
    "description": "JSON with a registry reference, or a multipart upload of a tarball.",
    "content": {
        "application/json": {"schema": SubmitJsonSchema},
        "multipart/form-data": {"schema": SubmitUploadSchema},
    },
}


class LeaderboardQuerySchema(Schema):
    weights = fields.String(
        metadata={"description": "axis:weight pairs, e.g. performance:4,memory:0"}
    )
    instance_memory = fields.Float(
        validate=validate.Range(min=0, min_inclusive=False),
        metadata={"description": "GiB memory is subtracted from (default: the task's)"},
    )


class TaskSubmissionListQuerySchema(Schema):
    limit = fields.Integer(load_default=100, validate=validate.Range(min=1, max=1000))


class SubmissionListQuerySchema(TaskSubmissionListQuerySchema):
    task = fields.String(metadata={"description": "only this task's submissions"})


# -- responses -------------------------------------------------------------------------------
class OpenSchema(Schema):
    """A response documented by its main fields; the body may carry more."""

    class Meta:
        unknown = INCLUDE


class ErrorBodySchema(Schema):
    code = fields.String(required=True, metadata={"description": "machine-readable code"})
    message = fields.String(required=True, metadata={"description": "a human sentence"})
    details = fields.Raw(metadata={"description": "per-field problems, when any"})


class ErrorSchema(Schema):
    """Every 4xx/5xx body: ``{"error": {"code", "message", "details"?}}``."""

    error = fields.Nested(ErrorBodySchema, required=True)


class SubmittedSchema(Schema):
    id = fields.String()
    job_id = fields.String()
    task = fields.String()
    name = fields.String()
    status = fields.String()
    url = fields.String()


class HealthSchema(OpenSchema):
    status = fields.String()
    jobs = fields.Dict(keys=fields.String(), values=fields.Integer())


class TaskSchema(OpenSchema):
    name = fields.String()
    rounds = fields.List(fields.Dict())
    limits = fields.Dict()
    weights = fields.Dict()


class TaskListSchema(OpenSchema):
    tasks = fields.List(fields.Nested(TaskSchema))


class FailureSchema(OpenSchema):
    code = fields.String()
    message = fields.String()
    log_tail = fields.String()


class JobSchema(OpenSchema):
    id = fields.String()
    status = fields.String(
        metadata={"description": "queued, running, done or failed (done/failed are final)"}
    )
    progress = fields.Float()
    stage = fields.String(allow_none=True)
    attempts = fields.Integer()
    max_attempts = fields.Integer()
    failure = fields.Nested(FailureSchema, allow_none=True)
    attempt_history = fields.List(fields.Dict())


class SubmissionSchema(OpenSchema):
    id = fields.String()
    task = fields.String()
    name = fields.String()
    runtime = fields.Dict(metadata={"description": "kind, protocol, image"})
    image_id = fields.String(allow_none=True)
    created_at = fields.String()
    job = fields.Nested(JobSchema, allow_none=True)
    results = fields.Dict(
        allow_none=True, metadata={"description": "the five axes, rounds, slices, profile"}
    )


class SubmissionListSchema(OpenSchema):
    submissions = fields.List(fields.Nested(SubmissionSchema))


class ScoresSchema(OpenSchema):
    id = fields.String()
    scores = fields.List(fields.Dict())


class LeaderboardSchema(OpenSchema):
    task = fields.String()
    weights = fields.Dict(keys=fields.String(), values=fields.Float())
    rounds = fields.List(fields.String())
    models = fields.List(fields.Dict())
    unranked = fields.List(fields.Dict())
