"""Schemas of the collection routes (``usecases.collection.examples`` checks a written
example against its task)."""

from __future__ import annotations

from marshmallow import INCLUDE, Schema, fields, validate

from api.schemas import OpenSchema
from usecases.collection.examples import MAX_EXPLANATION_CHARS, MAX_SLICE_CHARS

_ID = fields.String(validate=validate.Length(min=1, max=36))


class SettingsSchema(Schema):
    votes_needed = fields.Integer(validate=validate.Range(min=1, max=20))
    qa_f1_threshold = fields.Float(validate=validate.Range(min=0.0, max=1.0), allow_nan=False)
    writes_per_hour = fields.Integer(validate=validate.Range(min=1, max=10_000))
    max_field_chars = fields.Integer(validate=validate.Range(min=1, max=100_000))
    min_frozen_examples = fields.Integer(
        validate=validate.Range(min=1, max=1_000_000),
        metadata={"description": "validated examples a freeze needs (default 20): a frozen "
                  "set weighs as much as any other set of its round"},
    )  # fmt: skip


class OpenBodySchema(Schema):
    model_ids = fields.List(_ID, required=True, validate=validate.Length(min=1, max=20))
    settings = fields.Nested(SettingsSchema, load_default=dict)


class LoopModelSchema(OpenSchema):
    id = fields.String()
    name = fields.String()
    healthy = fields.Boolean()
    reason = fields.String(allow_none=True, metadata={"description": "why it is unhealthy"})


class CountsSchema(OpenSchema):
    written = fields.Integer()
    fooled = fields.Integer()
    unanswered = fields.Integer()


class CollectionSchema(OpenSchema):
    task = fields.String()
    round = fields.String()
    status = fields.String(metadata={"description": "open, closed or frozen"})
    opened_at = fields.String()
    models = fields.List(fields.Nested(LoopModelSchema))
    settings = fields.Nested(SettingsSchema)
    counts = fields.Nested(CountsSchema)


class ExampleBodySchema(Schema):
    """A written example. A task whose output type lets it name its answer key (translation:
    ``translatedText``) takes its gold under that key, so further top-level keys pass to the
    use case, which refuses any the task's output type does not write with."""

    class Meta:
        unknown = INCLUDE

    inputs = fields.Dict(keys=fields.String(), values=fields.String(), required=True)
    label = fields.String(validate=validate.Length(max=200))
    answer = fields.String(validate=validate.Length(max=100_000))
    answer_start = fields.Integer(validate=validate.Range(min=0))
    references = fields.List(
        fields.String(validate=validate.Length(max=100_000)),
        validate=validate.Length(max=20),
        metadata={"description": "translation: reference translations beside the first"},
    )
    explanation = fields.String(validate=validate.Length(max=MAX_EXPLANATION_CHARS))
    slices = fields.Dict(
        keys=fields.String(validate=validate.Length(max=64)),
        values=fields.String(validate=validate.Length(max=MAX_SLICE_CHARS)),
        metadata={"description": "the task's slice columns (e.g. topic) for this example; a "
                  "frozen set keeps them, and columns left out are `unspecified`"},
    )  # fmt: skip
    model_id = _ID


class WrittenSchema(OpenSchema):
    id = fields.String()
    model_id = fields.String(allow_none=True)
    model_answer = fields.Dict(allow_none=True)
    fooled = fields.Boolean(allow_none=True, metadata={"description": "null: unanswered"})
    unanswered = fields.Boolean()
    message = fields.String(metadata={"description": "a sentence for the writer"})


class ExampleQuerySchema(Schema):
    mine = fields.Boolean(load_default=False, metadata={"description": "only the caller's own"})
    limit = fields.Integer(load_default=100, validate=validate.Range(min=1, max=500))


class ExampleSchema(OpenSchema):
    id = fields.String()
    author = fields.String(allow_none=True, metadata={"description": "the author's user id"})
    inputs = fields.Dict()
    intended = fields.Dict()
    explanation = fields.String(allow_none=True)
    slices = fields.Dict(keys=fields.String(), values=fields.String())
    model_id = fields.String(allow_none=True)
    model_answer = fields.Dict(allow_none=True)
    fooled = fields.Boolean(allow_none=True)
    answer_error = fields.String(allow_none=True)
    verdict = fields.String(allow_none=True)
    created_at = fields.String()


class ProvenanceSchema(OpenSchema):
    example_id = fields.String()
    origin = fields.String(metadata={"description": "human, or machine (the adversary)"})
    author_id = fields.String(allow_none=True)
    model_id = fields.String(allow_none=True, metadata={"description": "the model that answered"})
    model_answer = fields.Dict(allow_none=True)
    fooled = fields.Boolean(allow_none=True)
    explanation = fields.String(allow_none=True)
    verdict = fields.String(allow_none=True)
    written_at = fields.String()


class ExportLineSchema(OpenSchema):
    """One line of a round's export (the task's input fields are in it too)."""

    uid = fields.String()
    intended = fields.Dict(metadata={"description": "label, or answer and answer_start"})
    slices = fields.Dict(keys=fields.String(), values=fields.String())
    provenance = fields.Nested(ProvenanceSchema)


class ExampleListSchema(OpenSchema):
    examples = fields.List(fields.Nested(ExampleSchema))
