"""Request and response schemas (marshmallow) that also feed the OpenAPI document."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

NAME = validate.Regexp(
    r"^[A-Za-z0-9][A-Za-z0-9 ._\-]{0,127}$", error="1-128 letters, digits, ' ._-'"
)


class RuntimeSchema(Schema):
    kind = fields.String(required=True, validate=validate.OneOf(["docker", "process", "url"]))
    image = fields.String(metadata={"description": "docker: image ID or registry reference"})
    protocol = fields.String(load_default="v1", validate=validate.OneOf(["v1", "dynalab2"]))
    url = fields.String(metadata={"description": "url: http://host:port of a running model"})
    command = fields.List(fields.String(), metadata={"description": "process: argv"})
    cwd = fields.String()


class SubmitJsonSchema(Schema):
    name = fields.String(required=True, validate=NAME)
    runtime = fields.Nested(RuntimeSchema, required=True)


class SubmitFormSchema(Schema):
    name = fields.String(required=True, validate=NAME)
    protocol = fields.String(load_default="v1", validate=validate.OneOf(["v1", "dynalab2"]))


class LeaderboardQuerySchema(Schema):
    weights = fields.String(
        metadata={"description": "axis:weight pairs, e.g. performance:4,memory:0"}
    )
    instance_memory = fields.Float(
        validate=validate.Range(min=0, min_inclusive=False),
        metadata={"description": "GiB memory is subtracted from (default: the task's)"},
    )


class SubmissionListQuerySchema(Schema):
    task = fields.String()
    limit = fields.Integer(load_default=100, validate=validate.Range(min=1, max=1000))


class SubmittedSchema(Schema):
    id = fields.String()
    job_id = fields.String()
    task = fields.String()
    name = fields.String()
    status = fields.String()
    url = fields.String()
