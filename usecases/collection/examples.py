"""A written example checked against its task: the input fields it needs, the intended
output its type takes, and the dataset parser's own checks on labels and spans."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from configs.schema import TaskSpec
from configs.vocabulary.images import ImageError, check_image
from evaluator.inputs.datasets import DatasetError, parse_lines
from metrics.outputs import OUTPUT_TYPES, get_output_type
from store.collection import CollectionRefused

MAX_EXPLANATION_CHARS = 1000
MAX_SLICE_CHARS = 100


@dataclass(frozen=True)
class CheckedExample:
    """A written example that fits its task: what the model sees and what was intended."""

    inputs: Mapping[str, str]
    intended: Mapping[str, Any]
    slices: Mapping[str, str] = field(default_factory=dict)  # as the writer gave them


def check_example(task: TaskSpec, body: Mapping[str, Any], max_chars: int) -> CheckedExample:
    """The example's inputs and intended output, or a 422 naming the first problem."""
    inputs = body.get("inputs") or {}
    missing = [f for f in task.input_fields if f not in inputs]
    extra = sorted(set(inputs) - set(task.input_fields))
    if missing or extra:
        problem = f"missing {missing[0]!r}" if missing else f"unknown field {extra[0]!r}"
        raise _invalid(f"inputs: {problem} (the task's fields: {list(task.input_fields)})")
    for name in task.input_fields:
        if name in task.image_fields:  # bounded by the task's image limit, not by characters
            _check_picture(task, name, inputs[name])
            continue
        if not inputs[name].strip():
            raise _invalid(f"inputs.{name}: write some text")
        if len(inputs[name]) > max_chars:
            raise _invalid(f"inputs.{name}: at most {max_chars} characters")
    _refuse_unknown_keys(task, body)
    intended = _intended(task, body)
    slices = _slices(task, body.get("slices"))
    _refuse_nul(body, "")
    _parse(task, inputs, intended)
    return CheckedExample({n: inputs[n] for n in task.input_fields}, intended, slices)


_BODY_KEYS = ("inputs", "explanation", "slices", "model_id")


def _refuse_nul(value: Any, where: str) -> None:
    """No NUL character anywhere: no database stores it in text (PostgreSQL refuses it)."""
    if isinstance(value, str) and "\x00" in value:
        raise _invalid(f"{where or 'body'}: NUL characters are not text")
    if isinstance(value, Mapping):
        for key, item in value.items():
            _refuse_nul(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_nul(item, f"{where}[{i}]")


def _check_picture(task: TaskSpec, name: str, value: str) -> None:
    """An image field holds a base64 PNG or JPEG within the task's limit (422 otherwise)."""
    try:
        check_image(value, task.limits.max_input_image_bytes)
    except ImageError as exc:
        raise _invalid(f"inputs.{name}: {exc}") from None


def _every_types_gold_fields() -> set[str]:
    """The gold fields of every registered output type, under each type's own key."""
    types = (OUTPUT_TYPES.get(name) for name in OUTPUT_TYPES.names())
    return {f for output in types for f in output.gold_fields(output.key)}


def _refuse_unknown_keys(task: TaskSpec, body: Mapping[str, Any]) -> None:
    """A key neither the example's nor any output type's gold is a mistake worth naming."""
    known = {*_BODY_KEYS, task.output_key, *_every_types_gold_fields()}
    unknown = sorted(set(body) - known)
    if unknown:
        raise _invalid(f"{unknown[0]}: unknown field")
    gold = body.get(task.output_key)
    if gold is not None and not isinstance(gold, str):
        raise _invalid(f"{task.output_key}: text")


def _slices(task: TaskSpec, given: Any) -> dict[str, str]:
    """The task's slice columns the writer filled in (fairness slices of the frozen set);
    a column the task does not have, or a value that is not short text, is refused."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise _invalid("slices: an object of slice column to value")
    unknown = sorted(set(given) - set(task.slices))
    if unknown:
        raise _invalid(f"slices: unknown column {unknown[0]!r} (the task's: {list(task.slices)})")
    found = {}
    for column, value in given.items():
        if not isinstance(value, str) or len(value) > MAX_SLICE_CHARS:
            raise _invalid(f"slices.{column}: text of at most {MAX_SLICE_CHARS} characters")
        if any(not c.isprintable() for c in value):  # a slice value is one short label
            raise _invalid(f"slices.{column}: printable text on one line")
        if value.strip():
            found[str(column)] = value.strip()
    return found


def _intended(task: TaskSpec, body: Mapping[str, Any]) -> dict[str, Any]:
    """The writer's gold, by the output type's fields; another type's fields are refused,
    not dropped (a writer who sends an answer to a label task meant something by it)."""
    output = get_output_type(task.output_type)
    own = output.gold_fields(task.output_key)
    foreign = sorted(f for f in _every_types_gold_fields() if f in body and f not in own)
    if foreign:
        raise _invalid(
            f"{foreign[0]}: this task's examples take {' and '.join(own)}, not {foreign[0]}"
        )
    required = output.required_when_written(task.output_key)
    missing = [f for f in required if body.get(f) is None or body.get(f) == ""]
    if missing:
        hint = output.write_hint.format(labels=list(task.labels))
        raise _invalid(f"{required[0]}: {hint}")
    return {f: body[f] for f in own if f in body}


def _parse(task: TaskSpec, inputs: Mapping[str, str], intended: Mapping[str, Any]) -> None:
    """Run the row through the dataset parser: labels and spans are checked as in a set."""
    row = {"uid": "written", **{s: "" for s in task.slices}, **inputs, **intended}
    try:
        parse_lines(task, [json.dumps(row)], "example")
    except DatasetError as exc:
        raise _invalid(str(exc).split(": ", 1)[-1]) from None


def _invalid(message: str) -> CollectionRefused:
    return CollectionRefused("invalid", "invalid_example", message)
