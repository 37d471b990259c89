"""Freezing a collection round: its validated examples become a versioned held-out set of
the round (through the same checks and content-addressed store as any uploaded set), and
every scored model is queued to be scored on it, below new submissions."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

from flask_smorest import Blueprint
from marshmallow import fields
from sqlalchemy import select

from api.collection import stop_round_models
from api.docs import error_docs
from api.errors import ApiError
from api.rounds import Change, ChangeSchema, RoundRefused, Upload, add_dataset, owned_task
from api.routes import service
from api.service import Service
from configs.schema import TaskSpec
from store.collection import Collection, Settings
from store.models import CollectedExampleRow, CollectionRoundRow

blp = Blueprint(
    "freezing", __name__, url_prefix="/api/v1", description="Freezing a collection round"
)
errors = error_docs(
    blp,
    {
        401: "no credentials, or an unknown, expired or revoked token",
        403: "not the task's owner or an admin, or a token without the submit scope",
        404: "no such task (or not yours to see), or a round that was never collected",
        409: "round_frozen, nothing_validated, too_few_validated (under the round's "
        "min_frozen_examples) or concurrent_change",
        413: "the frozen set is over the dataset size limit",
        422: "a validated example does not fit the task's fields and labels",
    },
)
FROZEN_DATASET = "collected"  # the name a frozen round's set takes within the round
UNSPECIFIED_SLICE = "unspecified"  # writers are not asked for slice attributes


class FreezeSchema(ChangeSchema):
    frozen_examples = fields.Integer(metadata={"description": "validated examples frozen"})
    dropped_examples = fields.Dict(
        keys=fields.String(), values=fields.Integer(),
        metadata={"description": "the round's examples left out, by why: `unsettled` (fooled "
                  "a model, no verdict yet), `rejected` (judged incorrect or flagged), "
                  "`did_not_fool` (never up for validation)"},
    )  # fmt: skip


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


def dropped_examples(rows: list[CollectedExampleRow]) -> dict[str, int]:
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


def dataset_lines(task: TaskSpec, rows: list[CollectedExampleRow]) -> bytes:
    """The validated examples as the task's JSONL rows, in the order they were written."""
    lines = []
    for row in rows:
        record: dict[str, Any] = {"uid": f"collected-{row.id}", **row.inputs}
        if task.output_type == "answer":
            record["answer"] = row.intended["answer"]
            record["answer_start"] = row.intended.get("answer_start")
        else:
            record[task.output_key] = row.intended["label"]
        for column in task.slices:
            record.setdefault(column, UNSPECIFIED_SLICE)
        lines.append(json.dumps(record, ensure_ascii=False, sort_keys=True))
    return ("\n".join(lines) + "\n").encode()


def freeze(svc: Service, task: TaskSpec, round_name: str) -> Frozen:
    """Freeze ``round_name``: its examples judged correct become the round's ``collected``
    set; freezing again after a failure half-way writes nothing twice (the set is
    content-addressed, so the same examples are the same version)."""
    with svc.db.session() as session:
        state = session.get(CollectionRoundRow, (task.name, round_name))
        if state is None:
            raise RoundRefused(404, "unknown_round", f"round {round_name!r} was never collected")
        if state.status == "frozen":
            raise RoundRefused(409, "round_frozen", f"round {round_name!r} is frozen already")
        every = list(
            session.scalars(
                select(CollectedExampleRow)
                .where(
                    CollectedExampleRow.task == task.name,
                    CollectedExampleRow.round == round_name,
                )
                .order_by(CollectedExampleRow.created_at, CollectedExampleRow.id)
            )
        )
    rows = [row for row in every if row.verdict == "correct"]
    if not rows:
        raise RoundRefused(409, "nothing_validated", "no example of this round is validated yet")
    needed = Settings.of(state.settings).min_frozen_examples
    if len(rows) < needed:
        raise RoundRefused(
            409, "too_few_validated",
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
    with svc.db.session() as session, session.begin():
        state = session.get(CollectionRoundRow, (task.name, round_name))
        assert state is not None  # rounds are never deleted
        state.status = "frozen"
        state.frozen_at = svc.clock.now()
        state.frozen_sha256 = (change.dataset or {}).get("sha256")
    frozen_state = Collection(svc.db, svc.clock).state(task.name, round_name)
    if frozen_state is not None:  # its live models are not needed any more
        stop_round_models(frozen_state)
    return Frozen(change, len(rows), dropped_examples(every))


@blp.route("/tasks/<task_name>/rounds/<round_name>/freeze", methods=["POST"])
@blp.alt_response(201, schema=FreezeSchema, success=True)
@blp.alt_response(200, schema=FreezeSchema, description="the same examples were frozen before")
@errors(401, 403, 404, 409, 413, 422)
def post_freeze(task_name: str, round_name: str) -> tuple[dict[str, Any], int]:
    """Freeze a collection round (task owner or admin): its validated examples become the
    round's `collected` dataset (a new task version), and every scored model is queued to
    be scored on it, below new submissions (`backfill_jobs`)."""
    task = owned_task(task_name)
    try:
        frozen = freeze(service(), task, round_name)
    except RoundRefused as exc:
        raise ApiError(exc.status, exc.code, exc.message) from None
    return frozen.to_dict(), 201 if frozen.change.created else 200
