"""Request and response schemas (marshmallow) that also feed the OpenAPI document."""

from __future__ import annotations

from typing import Any

from marshmallow import INCLUDE, Schema, ValidationError, fields, validate, validates_schema

from configs.vocabulary.names import MODEL_NAME_PATTERN, MODEL_NAME_RULE
from configs.vocabulary.numbers import WEIGHTS_PATTERN
from evaluator.transport.dialects import DEFAULT_DIALECT, dialect_choices
from store.queries import LIST_FIELDS


class FullMatch(validate.Regexp):
    """A Regexp that must match the whole value: ``$`` in Python also matches before a final
    newline, so ``regex.match`` let ``"name\n"`` (one character over the column) through. The
    pattern itself stays ECMA-compatible for the OpenAPI document."""

    def __call__(self, value: Any) -> Any:
        if self.regex.fullmatch(value) is None:
            raise ValidationError(self._format_error(value))
        return value


NAME = FullMatch(MODEL_NAME_PATTERN, error=MODEL_NAME_RULE)
# Bounded so that whatever the pattern allows is a finite number (an unbounded exponent let
# "4e999", infinity, through the schema to a 400); wide enough for any number a browser
# writes (17 significant digits, "1e-7").
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


def _publish_field() -> fields.Boolean:
    return fields.Boolean(
        metadata={
            "description": "publish the results once scored, so anyone who may see the task "
            "opens the model's page (default: the task's publish_results, false unless its "
            "YAML sets it); the submitter or an admin changes it later"
        }
    )


REQUIREMENTS_DESCRIPTION = (
    "what the worker that runs it must have; only such a worker claims its jobs: `gpus` "
    "(0-16), `cpus` (1-1024), `memory_gib` (> 0), `gpu_model` (a part of the GPU's name, "
    "any case), `labels` (up to 16 of an operator's worker labels, each 1-63 of a-z 0-9 . _ -)"
)


class SubmitJsonSchema(Schema):
    name = fields.String(required=True, validate=NAME)
    runtime = fields.Nested(RuntimeSchema)  # or upload: exactly one of them
    upload = fields.String(
        validate=validate.Length(min=1, max=64),
        metadata={"description": "a complete resumable upload of yours (or give `runtime`)"},
    )
    protocol = fields.String(
        validate=PROTOCOL,
        metadata={"description": "with `upload`: how the image speaks (default: dynaeval)"},
    )
    publish = _publish_field()
    # Raw, not Dict: anything but an object is the route's 422 invalid_requirements, as in
    # the form, rather than the schema's invalid_submission
    requirements = fields.Raw(
        allow_none=True, metadata={"type": "object", "description": REQUIREMENTS_DESCRIPTION}
    )

    @validates_schema
    def _one_source(self, data: dict[str, Any], **_: Any) -> None:
        if ("runtime" in data) == ("upload" in data):
            raise ValidationError("give exactly one of runtime and upload", "runtime")
        if "protocol" in data and "upload" not in data:
            raise ValidationError("protocol goes with upload (a runtime names its own)", "protocol")


class SubmitFormSchema(Schema):
    name = fields.String(required=True, validate=NAME)
    protocol = fields.String(load_default=DEFAULT_DIALECT, validate=PROTOCOL)
    publish = _publish_field()
    requirements = fields.String(
        validate=validate.Length(max=2048),
        metadata={"description": "as JSON text: " + REQUIREMENTS_DESCRIPTION},
    )


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


LEADERBOARD_PAGE = 100
LEADERBOARD_MAX_PAGE = 10_000


class WeightsQuerySchema(Schema):
    """The viewer's weights: what every leaderboard route and download reads."""

    weights = fields.String(
        metadata={
            "description": "axis:weight pairs, e.g. performance:4,memory:0 (numbers >= 0)",
            "pattern": WEIGHTS_PATTERN,
        }
    )
    instance_memory = fields.Float(
        validate=validate.Range(min=0, min_inclusive=False),
        # OpenAPI 3.0: a boolean beside minimum (apispec documents only "minimum: 0")
        metadata={
            "description": "GiB memory is subtracted from, > 0 (default: the task's)",
            "exclusiveMinimum": True,
        },
    )


class LeaderboardQuerySchema(WeightsQuerySchema):
    """The weights, the round weights and the page of the leaderboard route."""

    rounds = fields.String(
        validate=validate.Length(max=4096),
        metadata={
            "description": "round:weight pairs, as the page and the download take them "
            "(rounds not named keep the task's weights; default: the task's round weights)"
        },
    )

    limit = fields.Integer(
        load_default=LEADERBOARD_PAGE,
        validate=validate.Range(min=1, max=LEADERBOARD_MAX_PAGE),
        metadata={"description": f"models per page (default {LEADERBOARD_PAGE})"},
    )
    offset = fields.Integer(
        load_default=0,
        validate=validate.Range(min=0),
        metadata={"description": "the rank position the page starts at (0: the top)"},
    )


def _list_fields(text: str) -> None:
    unknown = sorted(set(text.split(",")) - set(LIST_FIELDS))
    if unknown:
        raise ValidationError(f"unknown fields {unknown}: choose from {', '.join(LIST_FIELDS)}")


class TaskSubmissionListQuerySchema(Schema):
    limit = fields.Integer(load_default=100, validate=validate.Range(min=1, max=1000))
    include = fields.String(
        data_key="fields",
        validate=[validate.Length(max=256), _list_fields],
        metadata={
            "description": "comma-separated: only these of each submission (id always "
            f"comes), and only the reads they need; of {', '.join(LIST_FIELDS)}. Default: all",
            "pattern": rf"^({'|'.join(LIST_FIELDS)})(,({'|'.join(LIST_FIELDS)}))*$",
        },
    )
    cursor = fields.String(
        validate=validate.Length(max=512),
        metadata={
            "description": "opaque: the next_cursor of the previous page (a bad one is 400 "
            "bad_cursor); without it, the first page"
        },
    )


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


class QuotaLimitSchema(Schema):
    limit = fields.Integer(allow_none=True, metadata={"description": "null: no limit"})
    used = fields.Integer()
    remaining = fields.Integer(allow_none=True, metadata={"description": "null: no limit"})


class DailyQuotaSchema(QuotaLimitSchema):
    resets_at = fields.String(metadata={"description": "the next midnight UTC"})


class QuotaSchema(Schema):
    """The caller's submissions left on a task (admins are exempt: no limits)."""

    task = fields.String()
    exempt = fields.Boolean()
    daily = fields.Nested(DailyQuotaSchema)
    total = fields.Nested(QuotaLimitSchema)


class SubmittedSchema(Schema):
    id = fields.String()
    job_id = fields.String()
    task = fields.String()
    name = fields.String()
    status = fields.String()
    url = fields.String()
    quota = fields.Nested(QuotaSchema, metadata={"description": "what is left after this one"})
    replayed = fields.Boolean(
        metadata={
            "description": "true (with status 200) when the Idempotency-Key had already made "
            "this submission: nothing new was stored or charged"
        }
    )


class HealthSchema(OpenSchema):
    status = fields.String()
    jobs = fields.Dict(keys=fields.String(), values=fields.Integer())


class ReadySchema(OpenSchema):
    status = fields.String(metadata={"description": "`ready`"})


class TaskSchema(OpenSchema):
    name = fields.String()
    rounds = fields.List(fields.Dict())
    limits = fields.Dict()
    weights = fields.Dict()
    queue = fields.Dict(
        metadata={
            "description": "in the task list only: jobs `queued` and `running` on the task, "
            "and `oldest_wait_s`, how long its oldest job ready to run has waited (0: none)"
        }
    )


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
    step = fields.Dict(
        metadata={
            "description": "the stage as data: phase (queued, claimed, starting, scoring, "
            "profiling, done, ...) and, while scoring a set, its round, dataset and variant "
            "(original or a perturbation); the evaluator reports whole sets, not examples"
        }
    )
    queue = fields.Nested(
        "QueuePlaceSchema",
        allow_none=True,
        metadata={"description": "a queued job's place (GET /submissions/{id} only)"},
    )
    attempts = fields.Integer()
    max_attempts = fields.Integer()
    failure = fields.Nested(FailureSchema, allow_none=True)
    attempt_history = fields.List(fields.Dict())


class QueuePlaceSchema(OpenSchema):
    ahead = fields.Integer(metadata={"description": "queued jobs a worker claims before it"})
    workers = fields.Integer(metadata={"description": "workers holding a live lease now"})
    median_run_s = fields.Float(
        allow_none=True, metadata={"description": "median run of the last 50 done jobs"}
    )
    estimated_start = fields.String(
        allow_none=True,
        metadata={
            "description": "now + median_run_s x ceil((ahead + 1) / workers), not before the "
            "job's retry time; null without a done job or a live worker, or when no live "
            "worker meets the job's requirements"
        },
    )
    capable_workers = fields.Integer(
        allow_none=True,
        metadata={
            "description": "live workers whose capabilities meet the submission's "
            "requirements (0: none can run it until one starts); null: it has none"
        },
    )


class ImageGoneSchema(OpenSchema):
    """A model whose image is gone keeps its scores; backfills skip it."""

    at = fields.String(allow_none=True)
    reason = fields.String()


class SubmissionSchema(OpenSchema):
    id = fields.String()
    task = fields.String()
    name = fields.String()
    runtime = fields.Dict(metadata={"description": "kind, protocol, image"})
    requirements = fields.Dict(
        metadata={"description": "what a worker must have to run it ({}: nothing)"}
    )
    image_id = fields.String(allow_none=True)
    created_at = fields.String()
    image_gone = fields.Nested(
        ImageGoneSchema,
        allow_none=True,
        metadata={"description": "null while the image is kept; else when and why it went"},
    )
    job = fields.Nested(JobSchema, allow_none=True)
    results = fields.Dict(
        allow_none=True, metadata={"description": "the five axes, rounds, slices, profile"}
    )


class SubmissionListSchema(OpenSchema):
    submissions = fields.List(fields.Nested(SubmissionSchema))
    next_cursor = fields.String(
        allow_none=True,
        metadata={"description": "pass as ?cursor= for the next page; null on the last page"},
    )


class CancelledSchema(OpenSchema):
    id = fields.String()
    job_id = fields.String()
    status = fields.String(metadata={"description": "failed (with failure code cancelled)"})
    was = fields.String(metadata={"description": "queued or running before the cancel"})


class ScoresSchema(OpenSchema):
    id = fields.String()
    scores = fields.List(fields.Dict())
