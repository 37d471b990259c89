"""Request and response schemas of the validation routes (api/validation.py)."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from metrics.vmer import VERDICTS

VERDICT = fields.String(
    required=True,
    validate=validate.OneOf(VERDICTS),
    metadata={"description": "correct (it fooled the model fairly), incorrect or flagged"},
)


class VerdictSchema(Schema):
    verdict = VERDICT


class QueueQuerySchema(Schema):
    limit = fields.Integer(load_default=20, validate=validate.Range(min=1, max=100))


class QueuedExampleSchema(Schema):
    id = fields.String()
    origin = fields.String(metadata={"description": "human or machine"})
    inputs = fields.Dict(keys=fields.String())
    intended = fields.Dict(
        keys=fields.String(), metadata={"description": "{label} or {answer, answer_start}"}
    )
    explanation = fields.String(allow_none=True)
    model_id = fields.String(allow_none=True)
    model_answer = fields.Dict(keys=fields.String(), allow_none=True)
    fooled = fields.Boolean(allow_none=True)
    fooled_models = fields.List(fields.String())
    created_at = fields.String()


class QueueSchema(Schema):
    task = fields.String()
    round = fields.String()
    status = fields.String(metadata={"description": "open, closed or frozen"})
    votes_needed = fields.Integer()
    examples = fields.List(fields.Nested(QueuedExampleSchema))


class TallySchema(Schema):
    correct = fields.Integer()
    incorrect = fields.Integer()
    flagged = fields.Integer()


class SettlementSchema(Schema):
    example_id = fields.String()
    vote_id = fields.String(allow_none=True, metadata={"description": "the vote just cast"})
    settled = fields.Boolean()
    verdict = fields.String(allow_none=True, metadata={"description": "null: not settled"})
    settled_by = fields.String(
        allow_none=True, metadata={"description": "`votes`, or the user who settled it"}
    )
    settled_at = fields.String(allow_none=True)
    votes = fields.Nested(TallySchema)


class VoteSchema(Schema):
    id = fields.String()
    voter = fields.String(metadata={"description": "the voter's user name"})
    verdict = fields.String()
    created_at = fields.String()


class VoteListSchema(Schema):
    example_id = fields.String()
    votes = fields.List(fields.Nested(VoteSchema))


class VmerRowSchema(Schema):
    origin = fields.String(metadata={"description": "human or machine"})
    submitted = fields.Integer(metadata={"description": "including unanswered examples"})
    fooled = fields.Integer()
    rejected_fooled = fields.Integer(
        metadata={"description": "fooled, judged incorrect or flagged"}
    )
    validated_fooled = fields.Integer(metadata={"description": "fooled, judged correct"})
    unvalidated_fooled = fields.Integer(
        metadata={"description": "fooled, not settled yet: never counted in vmer"}
    )
    unanswered = fields.Integer(metadata={"description": "the model gave no answer"})
    vmer = fields.Float(
        allow_none=True, metadata={"description": "validated_fooled / submitted; null: none"}
    )
    mer = fields.Float(allow_none=True, metadata={"description": "fooled / submitted"})


class VmerModelSchema(VmerRowSchema):
    model_id = fields.String()
    model_name = fields.String(allow_none=True)


class VmerWriterSchema(VmerRowSchema):
    writer = fields.String(allow_none=True, metadata={"description": "null: machine-proposed"})


class VmerSchema(Schema):
    task = fields.String()
    round = fields.String()
    status = fields.String()
    votes_needed = fields.Integer()
    totals = fields.List(fields.Nested(VmerRowSchema), metadata={"description": "per origin"})
    models = fields.List(fields.Nested(VmerModelSchema))
    writers = fields.List(fields.Nested(VmerWriterSchema))
