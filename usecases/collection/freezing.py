"""Freezing a collection round: its validated examples become a versioned held-out set of
the round (through the same checks and content-addressed store as any uploaded set), and
every scored model is queued to be scored on it, below new submissions."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from configs.schema import TaskSpec
from metrics.outputs import get_output_type
from store.collection import Collection, StoredExample
from usecases.collection.writing import stop_round_models
from usecases.rounds import Change, RoundRefused, Upload, add_dataset
from usecases.service import Service

FROZEN_DATASET = "collected"  # the name a frozen round's set takes within the round
UNSPECIFIED_SLICE = "unspecified"  # writers are not asked for slice attributes


@dataclass(frozen=True)
class Frozen:
    change: Change
    examples: int
    dropped: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.change.to_dict(),
            "frozen_examples": self.examples,
            "dropped_examples": dict(self.dropped),
        }


def dropped_examples(rows: list[StoredExample]) -> dict[str, int]:
    """What a freeze leaves out of the round's examples, by reason (nothing silently)."""
    dropped = {"unsettled": 0, "rejected": 0, "did_not_fool": 0}
    for row in rows:
        if row.verdict in ("incorrect", "flagged"):
            dropped["rejected"] += 1
        elif row.verdict is None and row.fooled:
            dropped["unsettled"] += 1
        elif row.verdict is None:
            dropped["did_not_fool"] += 1
    return dropped


def provenance(row: StoredExample) -> dict[str, Any]:
    """Where a collected example came from: who wrote it (or ``machine``: the adversary),
    which live model answered and how, the writer's explanation and the verdict."""
    return {
        "example_id": row.id,
        "origin": row.origin,
        "author_id": row.author_id,
        "model_id": row.model_id,
        "model_answer": None if row.model_answer is None else dict(row.model_answer),
        "fooled": row.fooled,
        "explanation": row.explanation,
        "verdict": row.verdict,
        "written_at": row.created_at.isoformat() + "Z",
    }


def export_lines(task: TaskSpec, rows: list[StoredExample]) -> Iterator[str]:
    """Every example of a round as JSONL, oldest first: the task's fields, the intended
    output, the slices as written and the provenance (what the owner takes elsewhere)."""
    for row in rows:
        record: dict[str, Any] = {
            "uid": f"collected-{row.id}",
            **row.inputs,
            "intended": dict(row.intended),
            "slices": {c: row.slices.get(c) or UNSPECIFIED_SLICE for c in task.slices},
            "provenance": provenance(row),
        }
        yield json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"


def dataset_lines(task: TaskSpec, rows: list[StoredExample]) -> bytes:
    """The validated examples as the task's JSONL rows, in the order they were written."""
    lines = []
    for row in rows:
        record: dict[str, Any] = {"uid": f"collected-{row.id}", **row.inputs}
        gold_fields = get_output_type(task.output_type).gold_fields(task.output_key)
        record.update({f: row.intended[f] for f in gold_fields if f in row.intended})
        for column in task.slices:  # as the writer gave it, else said to be unknown
            record.setdefault(column, row.slices.get(column) or UNSPECIFIED_SLICE)
        record["provenance"] = provenance(row)  # the evaluator reads only the task's fields
        lines.append(json.dumps(record, ensure_ascii=False, sort_keys=True))
    return ("\n".join(lines) + "\n").encode()


def freeze(svc: Service, task: TaskSpec, round_name: str) -> Frozen:
    """Freeze ``round_name``: its examples judged correct become the round's ``collected``
    set; freezing again after a failure half-way writes nothing twice (the set is
    content-addressed, so the same examples are the same version)."""
    collection = Collection(svc.db, svc.clock)
    state = collection.state(task.name, round_name)
    if state is None:
        raise RoundRefused(
            "not_found", "unknown_round", f"round {round_name!r} was never collected"
        )
    if state.status == "frozen":
        raise RoundRefused("conflict", "round_frozen", f"round {round_name!r} is frozen already")
    every = collection.every_example(task.name, round_name)
    rows = [row for row in every if row.verdict == "correct"]
    if not rows:
        raise RoundRefused(
            "conflict", "nothing_validated", "no example of this round is validated yet"
        )
    needed = state.settings.min_frozen_examples
    if len(rows) < needed:
        raise RoundRefused(
            "conflict", "too_few_validated",
            f"{len(rows)} examples of this round are validated; a freeze needs at least {needed} "
            "(the round's min_frozen_examples), since a frozen set weighs as much as any other "
            "set of its round",
        )  # fmt: skip
    new_round = round_name not in {spec.name for spec in task.rounds}
    upload = Upload(
        round_name, FROZEN_DATASET, io.BytesIO(dataset_lines(task, rows)),
        f"{round_name}-collected.jsonl", new_round=new_round,
    )  # fmt: skip
    change = add_dataset(svc, task, upload)
    collection.mark_frozen(task.name, round_name, (change.dataset or {}).get("sha256"))
    frozen_state = collection.state(task.name, round_name)
    if frozen_state is not None:  # its live models are not needed any more
        stop_round_models(svc, frozen_state)
    return Frozen(change, len(rows), dropped_examples(every))
