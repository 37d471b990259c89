"""Read a round's held-out JSONL set into Examples, validating every row against the task."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from configs.schema import DatasetSpec, TaskSpec
from configs.vocabulary.examples import Example
from configs.vocabulary.images import ImageError, check_image
from metrics.outputs import BadGold, get_output_type


class DatasetError(ValueError):
    """A dataset row does not fit its task (the message names file and line)."""


def load_examples(task: TaskSpec, dataset: DatasetSpec, config_dir: Path) -> tuple[Example, ...]:
    """Every row of ``dataset`` as an Example; uids must be unique, labels in the label set.
    A blob-backed set's path is the blob store's local file (absolute, so joining it to
    ``config_dir`` leaves it as it is)."""
    path = config_dir / dataset.path
    with path.open(encoding="utf-8") as handle:
        return parse_lines(task, handle, str(path))


def parse_lines(task: TaskSpec, lines: Iterable[str], source: str) -> tuple[Example, ...]:
    """Rows read one line at a time, each checked against ``task`` (fields, labels, answer
    spans, unique uids); DatasetError names ``source`` and the line."""
    examples: list[Example] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        example = _parse_row(task, line, f"{source}:{number}")
        if example.uid in seen:
            raise DatasetError(f"{source}:{number}: duplicate uid {example.uid!r}")
        seen.add(example.uid)
        examples.append(example)
    if not examples:
        raise DatasetError(f"{source}: no examples")
    return tuple(examples)


def check_file(task: TaskSpec, path: Path, source: str) -> DatasetDigest:
    """Validate a JSONL file against ``task`` as the evaluator will read it, digesting its
    bytes in the same pass; a line that is not UTF-8 is a DatasetError naming it."""
    digest = hashlib.sha256()
    with path.open("rb") as raw:
        examples = parse_lines(task, _decoded(raw, digest, source), source)
    return DatasetDigest(digest.hexdigest(), len(examples))


def file_digest(task: TaskSpec, path: Path) -> DatasetDigest:
    """The sha256 and example count of a set on disk (cached while the file is unchanged)."""
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size, task.name)
    if key not in _DIGESTS:
        _DIGESTS[key] = check_file(task, path, str(path))
    return _DIGESTS[key]


@dataclass(frozen=True)
class DatasetDigest:
    """What identifies a held-out set's content: its bytes' sha256, and its size."""

    sha256: str
    examples: int


_DIGESTS: dict[tuple[str, int, int, str], DatasetDigest] = {}


def _decoded(raw: Iterable[bytes], digest: Any, source: str) -> Iterator[str]:
    """The lines of a binary file as text, each fed to ``digest`` first."""
    for number, line in enumerate(raw, start=1):
        digest.update(line)
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError:
            raise DatasetError(f"{source}:{number}: not UTF-8 text") from None


def _parse_row(task: TaskSpec, line: str, where: str) -> Example:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{where}: not JSON ({exc.msg})") from None
    except RecursionError:  # an uploaded line nested deep enough to exhaust the parser
        raise DatasetError(f"{where}: not JSON (nested too deeply)") from None
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: a row must be a JSON object")
    required = ("uid", *task.input_fields, *task.slices)
    missing = [key for key in required if not isinstance(row.get(key), str)]
    if missing:
        raise DatasetError(f"{where}: missing or non-string field {missing[0]!r}")
    try:
        gold = get_output_type(task.output_type).read_gold(row, task.output_key, task.labels)
    except BadGold as exc:
        raise DatasetError(f"{where}: {exc}") from None
    for field in task.image_fields:  # checked here, so a model is never sent a bad image
        try:
            check_image(row[field], task.limits.max_input_image_bytes)
        except ImageError as exc:
            raise DatasetError(f"{where}: field {field!r}: {exc}") from None
    return Example(
        uid=row["uid"],
        inputs={field: row[field] for field in task.input_fields},
        target=gold.target,
        slices={column: row[column] for column in task.slices},
        answer_start=gold.answer_start,
        references=gold.references,
    )
