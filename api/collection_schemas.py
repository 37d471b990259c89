"""Schemas of the collection routes, and the check of a written example against its task
(the evaluator's own row parser decides labels and answer spans)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from marshmallow import Schema, fields, validate

from api.schemas import OpenSchema
from configs.schema import TaskSpec
from evaluator.inputs.datasets import DatasetError, parse_lines
from store.collection import CollectionRefused

MAX_EXPLANATION_CHARS = 1000
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
    inputs = fields.Dict(keys=fields.String(), values=fields.String(), required=True)
    label = fields.String(validate=validate.Length(max=200))
    answer = fields.String(validate=validate.Length(max=100_000))
    answer_start = fields.Integer(validate=validate.Range(min=0))
    explanation = fields.String(validate=validate.Length(max=MAX_EXPLANATION_CHARS))
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
    model_id = fields.String(allow_none=True)
    model_answer = fields.Dict(allow_none=True)
    fooled = fields.Boolean(allow_none=True)
    answer_error = fields.String(allow_none=True)
    verdict = fields.String(allow_none=True)
    created_at = fields.String()


class ExampleListSchema(OpenSchema):
    examples = fields.List(fields.Nested(ExampleSchema))


@dataclass(frozen=True)
class CheckedExample:
    """A written example that fits its task: what the model sees and what was intended."""

    inputs: Mapping[str, str]
    intended: Mapping[str, Any]


def check_example(task: TaskSpec, body: Mapping[str, Any], max_chars: int) -> CheckedExample:
    """The example's inputs and intended output, or a 422 naming the first problem."""
    inputs = body.get("inputs") or {}
    missing = [f for f in task.input_fields if f not in inputs]
    extra = sorted(set(inputs) - set(task.input_fields))
    if missing or extra:
        problem = f"missing {missing[0]!r}" if missing else f"unknown field {extra[0]!r}"
        raise _invalid(f"inputs: {problem} (the task's fields: {list(task.input_fields)})")
    for name in task.input_fields:
        if not inputs[name].strip():
            raise _invalid(f"inputs.{name}: write some text")
        if len(inputs[name]) > max_chars:
            raise _invalid(f"inputs.{name}: at most {max_chars} characters")
    intended = _intended(task, body)
    _parse(task, inputs, intended)
    return CheckedExample({n: inputs[n] for n in task.input_fields}, intended)


# What each output type's intended output is written with; the others' fields are refused,
# not dropped (a writer who sends an answer to a label task meant something by it).
_INTENDED_FIELDS = {"answer": ("answer", "answer_start"), "label": ("label",)}


def _intended(task: TaskSpec, body: Mapping[str, Any]) -> dict[str, Any]:
    own = _INTENDED_FIELDS.get(task.output_type, ())
    foreign = sorted(
        f for fields_ in _INTENDED_FIELDS.values() for f in fields_ if f in body and f not in own
    )
    if foreign:
        raise _invalid(
            f"{foreign[0]}: this task's examples take {' and '.join(own)}, not {foreign[0]}"
        )
    if task.output_type == "answer":
        if not body.get("answer") or body.get("answer_start") is None:
            raise _invalid("answer: send the answer and its answer_start in the context")
        return {"answer": body["answer"], "answer_start": body["answer_start"]}
    if body.get("label") is None:
        raise _invalid(f"label: choose one of {list(task.labels)}")
    return {"label": body["label"]}


def _parse(task: TaskSpec, inputs: Mapping[str, str], intended: Mapping[str, Any]) -> None:
    """Run the row through the dataset parser: labels and spans are checked as in a set."""
    row = {"uid": "written", **{s: "" for s in task.slices}, **inputs, **intended}
    try:
        parse_lines(task, [json.dumps(row)], "example")
    except DatasetError as exc:
        raise _invalid(str(exc).split(": ", 1)[-1]) from None


def _invalid(message: str) -> CollectionRefused:
    return CollectionRefused(422, "invalid_example", message)
