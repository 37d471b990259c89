"""Collection rounds: opening a round with its in-the-loop models, closing it, and storing
the examples people write against those models (issue #17).

Which model answers a write: the writer's choice when healthy, else the healthy in-the-loop
model that has answered the fewest examples of the round (ties: the order they were opened
with). Least-used is derived from the stored rows, so every API process picks the same way
without a shared cursor, and a model that was skipped while unhealthy catches up after the
owner resets health. A write is one transaction: the example, and the model marked unhealthy
when it failed; a round closed meanwhile stores nothing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from configs.vocabulary.clock import SYSTEM_CLOCK, Clock
from configs.vocabulary.refusals import Refused
from configs.vocabulary.runtimes import StoredRuntime
from metrics.outputs import get_output_type
from store.db import Database
from store.locks import named_lock
from store.models import CollectedExampleRow, CollectionRoundRow, ModelRow, ResultRow
from store.rules.loop_models import LoopModel, choose_model

OPEN, CLOSED, FROZEN = "open", "closed", "frozen"
HUMAN = "human"
NO_HEALTHY_MODEL = (
    "no in-the-loop model of this round is answering; each is restarted on its own within a "
    "minute of its failure"
)


@dataclass(frozen=True)
class Settings:
    """A collection round's settings, with the issue's defaults."""

    votes_needed: int = 2
    qa_f1_threshold: float = 0.4
    writes_per_hour: int = 60
    max_field_chars: int = 2000
    # A frozen set joins its round's others with an equal share (datasets average within a
    # round), so a handful of examples must not outweigh a test set of hundreds.
    min_frozen_examples: int = 20

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def fooled_threshold(
        self, output_type: str, task_threshold: float | None = None
    ) -> float | None:
        """This round's threshold for the output type's fooled rule: QA's token-F1 setting,
        else the task's own (``output.fooled_threshold``); None: the type's default."""
        uses_setting = get_output_type(output_type).uses_qa_f1_threshold
        return self.qa_f1_threshold if uses_setting else task_threshold

    @classmethod
    def of(cls, stored: Mapping[str, Any] | None) -> Settings:
        """The settings stored with a round; unknown keys are ignored."""
        known = {k: v for k, v in (stored or {}).items() if k in cls.__dataclass_fields__}
        return cls(**known)


class CollectionRefused(Refused):
    """A collection change refused (see configs.vocabulary.refusals)."""


@dataclass(frozen=True)
class RoundState:
    """A collection round as shown: status, models, settings and counts."""

    task: str
    round: str
    status: str
    models: tuple[LoopModel, ...]
    settings: Settings
    opened_at: datetime
    counts: Mapping[str, int] = field(default_factory=dict)

    def healthy(self) -> list[LoopModel]:
        return [m for m in self.models if m.unhealthy is None]


@dataclass(frozen=True)
class Written:
    """An example to store, with the model's answer or why there is none."""

    author_id: str
    inputs: Mapping[str, str]
    intended: Mapping[str, Any]
    explanation: str | None
    model_id: str | None
    model_answer: Mapping[str, Any] | None
    fooled: bool | None
    answer_error: str | None = None
    slices: Mapping[str, str] = field(default_factory=dict)  # slice column -> value


@dataclass(frozen=True)
class StoredExample:
    id: str
    author_id: str | None
    origin: str
    inputs: Mapping[str, Any]
    intended: Mapping[str, Any]
    explanation: str | None
    model_id: str | None
    model_answer: Mapping[str, Any] | None
    fooled: bool | None
    answer_error: str | None
    verdict: str | None
    created_at: datetime
    slices: Mapping[str, str] = field(default_factory=dict)


class Collection:
    """Collection rounds and their written examples, on one database and clock."""

    def __init__(self, db: Database, clock: Clock = SYSTEM_CLOCK) -> None:
        self.db, self.clock = db, clock

    def open(
        self,
        task: str,
        round_name: str,
        model_ids: Sequence[str],
        settings: Settings,
        opened_by: str | None,
    ) -> RoundState:
        """Open ``round_name`` (new, or closed: reopening resets every model's health)."""
        with self.db.session() as session, session.begin():
            self._check_models(session, task, model_ids)
            row = session.get(CollectionRoundRow, (task, round_name))
            if row is not None and row.status != CLOSED:
                code = "round_frozen" if row.status == FROZEN else "collection_open"
                raise CollectionRefused(
                    "conflict", code, f"round {round_name!r} is {row.status} already"
                )
            if row is None:
                row = CollectionRoundRow(task=task, round=round_name, frozen_at=None)
                session.add(row)
            row.status, row.model_ids, row.settings = OPEN, list(model_ids), settings.to_dict()
            row.unhealthy, row.opened_by, row.opened_at = {}, opened_by, self.clock.now()
        return self._existing(task, round_name)

    def close(self, task: str, round_name: str) -> RoundState:
        """Stop collection on an open round."""
        with self._serialised(task, round_name), self.db.session() as session, session.begin():
            row = self._row(session, task, round_name)
            if row.status != OPEN:
                raise CollectionRefused(
                    "conflict", "round_not_open", f"round {round_name!r} is {row.status}"
                )
            row.status = CLOSED
        return self._existing(task, round_name)

    def models_in_open_rounds(self, *, besides: tuple[str, str]) -> set[str]:
        """The in-the-loop models of every open round but ``besides`` (task, round)."""
        with self.db.session() as session:
            rows = session.scalars(
                select(CollectionRoundRow).where(CollectionRoundRow.status == OPEN)
            ).all()
            return {m for r in rows if (r.task, r.round) != besides for m in r.model_ids or ()}

    def state(self, task: str, round_name: str) -> RoundState | None:
        """The round as opened for collection, with its counts (None: never opened)."""
        with self.db.session() as session:
            row = session.get(CollectionRoundRow, (task, round_name))
            return None if row is None else self._state(session, row)

    def pick(self, state: RoundState, wanted: str | None) -> LoopModel | None:
        """The model to answer the next write (see the module's docstring); None when no
        model is healthy or due for a restart. A wanted model outside the loop is a 422."""
        if wanted is not None and all(m.id != wanted for m in state.models):
            raise CollectionRefused(
                "invalid", "invalid_example", f"model_id: {wanted!r} is not in this round's loop"
            )
        answered = self._answered(state.task, state.round)
        return choose_model(state.models, wanted, self.clock.now(), answered)

    def record(self, task: str, round_name: str, written: Written) -> str:
        """Store ``written`` (and mark its model unhealthy when it failed) in one
        transaction; the round must still be open. Returns the example's id."""
        example_id = str(uuid.uuid4())
        with self._serialised(task, round_name), self.db.session() as session, session.begin():
            row = self._row(session, task, round_name, lock=True)
            if row.status != OPEN:
                raise CollectionRefused(
                    "conflict", "round_not_open", f"round {round_name!r} is {row.status}"
                )
            marks = dict(row.unhealthy or {})
            if written.answer_error is not None and written.model_id is not None:
                now = self.clock.now().isoformat()
                marks[written.model_id] = {"error": written.answer_error, "at": now}
                row.unhealthy = marks
            elif written.model_id in marks:  # restarted, and it answered: healthy again
                marks.pop(written.model_id)
                row.unhealthy = marks
            session.add(
                CollectedExampleRow(
                    id=example_id, task=task, round=round_name, origin=HUMAN,
                    author_id=written.author_id, inputs=dict(written.inputs),
                    intended=dict(written.intended), explanation=written.explanation,
                    slices=dict(written.slices) or None, model_id=written.model_id,
                    model_answer=None if written.model_answer is None else dict(written.model_answer),
                    fooled=written.fooled, answer_error=written.answer_error, fooled_models=None,
                    source_uid=None, verdict=None, settled_by=None, settled_at=None,
                    created_at=self.clock.now(),
                )
            )  # fmt: skip
        return example_id

    def examples(
        self, task: str, round_name: str, author_id: str | None, limit: int = 100
    ) -> list[StoredExample]:
        """The round's human examples, newest first; only ``author_id``'s when given."""
        query = select(CollectedExampleRow).where(
            CollectedExampleRow.task == task, CollectedExampleRow.round == round_name
        )
        if author_id is not None:
            query = query.where(CollectedExampleRow.author_id == author_id)
        query = query.order_by(CollectedExampleRow.created_at.desc()).limit(limit)
        with self.db.session() as session:
            return [_example(row) for row in session.scalars(query)]

    def frozen_sets(self, task: str) -> dict[str, str]:
        """round -> sha256 of the set each frozen round of ``task`` became."""
        query = select(CollectionRoundRow.round, CollectionRoundRow.frozen_sha256).where(
            CollectionRoundRow.task == task, CollectionRoundRow.frozen_sha256.is_not(None)
        )
        with self.db.session() as session:
            return {str(name): str(digest) for name, digest in session.execute(query)}

    def every_example(self, task: str, round_name: str) -> list[StoredExample]:
        """All the round's examples, oldest first (what a freeze sorts through)."""
        query = (
            select(CollectedExampleRow)
            .where(CollectedExampleRow.task == task, CollectedExampleRow.round == round_name)
            .order_by(CollectedExampleRow.created_at, CollectedExampleRow.id)
        )
        with self.db.session() as session:
            return [_example(row) for row in session.scalars(query)]

    def mark_frozen(self, task: str, round_name: str, sha256: str | None) -> None:
        """Record that the round became the set ``sha256``: nothing more is written to it."""
        with self.db.session() as session, session.begin():
            row = self._row(session, task, round_name, lock=True)
            row.status, row.frozen_at, row.frozen_sha256 = FROZEN, self.clock.now(), sha256

    def written_examples(self, task: str, round_name: str) -> list[StoredExample]:
        """The round's examples written by people, oldest first, without those judged
        incorrect or flagged: the adversary's seeds besides the owner's own."""
        query = (
            select(CollectedExampleRow)
            .where(
                CollectedExampleRow.task == task,
                CollectedExampleRow.round == round_name,
                CollectedExampleRow.origin == "human",
                or_(
                    CollectedExampleRow.verdict.is_(None),
                    CollectedExampleRow.verdict.not_in(("incorrect", "flagged")),
                ),
            )
            .order_by(CollectedExampleRow.created_at, CollectedExampleRow.id)
        )
        with self.db.session() as session:
            return [_example(row) for row in session.scalars(query)]

    # -- helpers ----------------------------------------------------------------------------
    @contextmanager
    def _serialised(self, task: str, round_name: str) -> Iterator[None]:
        """Writes to one round's row, one at a time. PostgreSQL's FOR UPDATE (``_row``)
        does it there; SQLite ignores FOR UPDATE and its driver reads outside the write
        transaction, so two failing writes could each keep the other's health mark out
        of the ``unhealthy`` dict: a named lock (store.locks) serialises them instead."""
        if self.db.engine.dialect.name != "sqlite":
            yield
            return
        with named_lock(self.db, f"collection-round:{task}/{round_name}"):
            yield

    def _existing(self, task: str, round_name: str) -> RoundState:
        found = self.state(task, round_name)
        assert found is not None
        return found

    def _row(
        self, session: Session, task: str, round_name: str, lock: bool = False
    ) -> CollectionRoundRow:
        query = select(CollectionRoundRow).where(
            CollectionRoundRow.task == task, CollectionRoundRow.round == round_name
        )
        row = session.scalars(query.with_for_update() if lock else query).one_or_none()
        if row is None:
            raise CollectionRefused(
                "not_found",
                "unknown_round",
                f"round {round_name!r} of {task!r} is not open for collection",
            )
        return row

    def _check_models(self, session: Session, task: str, model_ids: Sequence[str]) -> None:
        """Every id names a model of ``task`` with a done result (else 422 naming it)."""
        if not model_ids:
            raise CollectionRefused(
                "invalid", "invalid_models", "model_ids: name at least one model"
            )
        if len(set(model_ids)) != len(model_ids):
            raise CollectionRefused(
                "invalid", "invalid_models", "model_ids: a model is named twice"
            )
        for model_id in model_ids:
            model = session.get(ModelRow, model_id)
            scored = session.scalar(
                select(func.count()).where(ResultRow.model_id == model_id, ResultRow.task == task)
            )
            if model is None or model.task != task or not scored:
                raise CollectionRefused(
                    "invalid",
                    "invalid_models",
                    f"model_ids: {model_id!r} is not a scored submission of task {task!r}",
                )

    def _state(self, session: Session, row: CollectionRoundRow) -> RoundState:
        unhealthy = {key: _mark(value) for key, value in (row.unhealthy or {}).items()}
        models = []
        for model_id in row.model_ids:
            model = session.get(ModelRow, model_id)
            models.append(
                LoopModel(
                    model_id,
                    model.name if model else model_id,
                    StoredRuntime(**model.runtime) if model else StoredRuntime(),
                    model.image_id if model else None,
                    *unhealthy.get(model_id, (None, None)),
                )
            )
        return RoundState(
            row.task, row.round, row.status, tuple(models), Settings.of(row.settings),
            row.opened_at, _counts(session, row.task, row.round),
        )  # fmt: skip

    def _answered(self, task: str, round_name: str) -> dict[str, int]:
        query = (
            select(CollectedExampleRow.model_id, func.count())
            .where(
                CollectedExampleRow.task == task,
                CollectedExampleRow.round == round_name,
                CollectedExampleRow.model_id.is_not(None),
            )
            .group_by(CollectedExampleRow.model_id)
        )
        with self.db.session() as session:
            return {str(model_id): int(n) for model_id, n in session.execute(query)}


def _counts(session: Session, task: str, round_name: str) -> dict[str, int]:
    """Written, fooled and unanswered human examples of the round."""
    query = select(CollectedExampleRow.fooled, func.count()).where(
        CollectedExampleRow.task == task,
        CollectedExampleRow.round == round_name,
        CollectedExampleRow.origin == HUMAN,
    )
    by = {
        fooled: int(n) for fooled, n in session.execute(query.group_by(CollectedExampleRow.fooled))
    }
    return {
        "written": sum(by.values()),
        "fooled": by.get(True, 0),
        "unanswered": by.get(None, 0),
    }


def _mark(stored: Any) -> tuple[str, datetime | None]:
    """A stored unhealthy mark as (reason, since); marks from before times were kept are
    a bare reason (their model is due for a restart at once)."""
    if isinstance(stored, Mapping):
        since = stored.get("at")
        return str(stored.get("error")), datetime.fromisoformat(since) if since else None
    return str(stored), None


def _example(row: CollectedExampleRow) -> StoredExample:
    return StoredExample(
        row.id, row.author_id, row.origin, dict(row.inputs), dict(row.intended),
        row.explanation, row.model_id, row.model_answer, row.fooled, row.answer_error,
        row.verdict, row.created_at, dict(row.slices or {}),
    )  # fmt: skip
