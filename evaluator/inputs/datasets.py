"""Read a round's held-out JSONL set into Examples, validating every row against the task."""

from __future__ import annotations

import json
from pathlib import Path

from configs.schema import DatasetSpec, TaskSpec
from configs.vocabulary.examples import Example


class DatasetError(ValueError):
    """A dataset row does not fit its task (the message names file and line)."""


def load_examples(task: TaskSpec, dataset: DatasetSpec, config_dir: Path) -> tuple[Example, ...]:
    """Every row of ``dataset`` as an Example; uids must be unique, labels in the label set."""
    path = config_dir / dataset.path
    examples: list[Example] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            example = _parse_row(task, line, f"{path}:{number}")
            if example.uid in seen:
                raise DatasetError(f"{path}:{number}: duplicate uid {example.uid!r}")
            seen.add(example.uid)
            examples.append(example)
    if not examples:
        raise DatasetError(f"{path}: no examples")
    return tuple(examples)


def _parse_row(task: TaskSpec, line: str, where: str) -> Example:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{where}: not JSON ({exc.msg})") from None
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: a row must be a JSON object")
    target_key = task.output_key
    required = ("uid", target_key, *task.input_fields, *task.slices)
    missing = [key for key in required if not isinstance(row.get(key), str)]
    if missing:
        raise DatasetError(f"{where}: missing or non-string field {missing[0]!r}")
    if task.output_type == "label" and row[target_key] not in task.labels:
        raise DatasetError(f"{where}: label {row[target_key]!r} not in {list(task.labels)}")
    answer_start = row.get("answer_start")
    if task.output_type == "answer":
        answer_start = _check_answer_span(row, where)
    return Example(
        uid=row["uid"],
        inputs={field: row[field] for field in task.input_fields},
        target=row[target_key],
        slices={column: row[column] for column in task.slices},
        answer_start=answer_start,
    )


def _check_answer_span(row: dict, where: str) -> int | None:
    start = row.get("answer_start")
    if start is None:
        return None
    context = row.get("context", "")
    if not isinstance(start, int) or context[start : start + len(row["answer"])] != row["answer"]:
        raise DatasetError(f"{where}: answer_start does not point at the answer in context")
    return start
