"""Validating collected examples: each validator's queue, votes, settlement and the
round's outcomes for vMER.

A vote and the settlement it may cause are one transaction that first locks the example
(a conditional UPDATE, which also starts SQLite's write transaction, then ``FOR UPDATE``
on PostgreSQL), so concurrent votes are counted one after another: an example is settled
exactly once, by the vote that reaches ``votes_needed`` matching verdicts. Every vote is
kept; a refused vote stores nothing."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import exists, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from configs.vocabulary.clock import SYSTEM_CLOCK, Clock
from configs.vocabulary.refusals import Refused
from metrics.vmer import MACHINE, VERDICTS, CollectedOutcome
from store.db import Database
from store.models import (
    CollectedExampleRow,
    CollectionRoundRow,
    ModelRow,
    UserRow,
    ValidationVoteRow,
)

DEFAULT_VOTES_NEEDED = 2
SETTLED_BY_VOTES = "votes"


class ValidationRefused(Refused):
    """A vote or settlement refused (see configs.vocabulary.refusals)."""


@dataclass(frozen=True)
class CollectionRound:
    """A round open (or once open) for collection, as validation and its page need it."""

    task: str
    round: str
    status: str
    model_ids: tuple[str, ...]
    votes_needed: int
    unhealthy: Mapping[str, str]
    opened_at: datetime
    frozen_at: datetime | None


@dataclass(frozen=True)
class ExampleRef:
    """Where an example belongs and who wrote it (for the caller's access checks)."""

    id: str
    task: str
    round: str
    origin: str
    author_id: str | None


@dataclass(frozen=True)
class QueuedExample:
    """An example waiting for validation: what a validator judges (never its author)."""

    id: str
    origin: str
    inputs: Mapping[str, Any]
    intended: Mapping[str, Any]
    explanation: str | None
    model_id: str | None
    model_answer: Mapping[str, Any] | None
    fooled: bool | None
    fooled_models: tuple[str, ...]
    created_at: datetime


@dataclass(frozen=True)
class Vote:
    id: str
    example_id: str
    voter: str  # the voter's user name
    verdict: str
    created_at: datetime


@dataclass(frozen=True)
class Settlement:
    """An example's state after a vote or a settlement."""

    example_id: str
    verdict: str | None  # None: not settled yet
    settled_by: str | None  # a user id, or "votes"
    settled_at: datetime | None
    tally: Mapping[str, int]  # verdict -> votes
    vote_id: str | None = None  # the vote just cast


def votes_needed(settings: Mapping[str, Any] | None) -> int:
    """The round's ``votes_needed`` setting (at least 1), else the default."""
    value = (settings or {}).get("votes_needed", DEFAULT_VOTES_NEEDED)
    usable = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return int(value) if usable else DEFAULT_VOTES_NEEDED


def _round(row: CollectionRoundRow) -> CollectionRound:
    return CollectionRound(
        task=row.task,
        round=row.round,
        status=row.status,
        model_ids=tuple(str(m) for m in row.model_ids or []),
        votes_needed=votes_needed(row.settings),
        unhealthy={str(k): str(v) for k, v in (row.unhealthy or {}).items()},
        opened_at=row.opened_at,
        frozen_at=row.frozen_at,
    )


def _for_validation() -> Any:
    """Examples validators judge: those that fooled their model, and machine proposals."""
    return (CollectedExampleRow.fooled.is_(True)) | (CollectedExampleRow.origin == MACHINE)


class Validation:
    """Validation operations over a Database."""

    def __init__(self, db: Database, clock: Clock = SYSTEM_CLOCK) -> None:
        self.db = db
        self.clock = clock

    # -- reads -------------------------------------------------------------------------------
    def collection_round(self, task: str, round_name: str) -> CollectionRound | None:
        with self.db.session() as session:
            row = session.get(CollectionRoundRow, (task, round_name))
            return None if row is None else _round(row)

    def example(self, example_id: str) -> ExampleRef | None:
        with self.db.session() as session:
            row = session.get(CollectedExampleRow, example_id)
            if row is None:
                return None
            return ExampleRef(row.id, row.task, row.round, row.origin, row.author_id)

    def queue(
        self, task: str, round_name: str, voter_id: str, limit: int = 20
    ) -> list[QueuedExample]:
        """The voter's queue, oldest first: unsettled examples for validation that they did
        not write and have not voted on."""
        voted = exists().where(
            ValidationVoteRow.example_id == CollectedExampleRow.id,
            ValidationVoteRow.voter_id == voter_id,
        )
        query = (
            select(CollectedExampleRow)
            .where(
                CollectedExampleRow.task == task,
                CollectedExampleRow.round == round_name,
                CollectedExampleRow.verdict.is_(None),
                _for_validation(),
                CollectedExampleRow.author_id.is_(None)
                | (CollectedExampleRow.author_id != voter_id),
                ~voted,
            )
            .order_by(CollectedExampleRow.created_at, CollectedExampleRow.id)
            .limit(limit)
        )
        with self.db.session() as session:
            return [_queued(row) for row in session.scalars(query)]

    def votes(self, example_id: str) -> list[Vote]:
        """Every vote on the example, oldest first, with the voters' names."""
        query = (
            select(ValidationVoteRow, UserRow.name)
            .join(UserRow, UserRow.id == ValidationVoteRow.voter_id)
            .where(ValidationVoteRow.example_id == example_id)
            .order_by(ValidationVoteRow.created_at, ValidationVoteRow.id)
        )
        with self.db.session() as session:
            return [
                Vote(row.id, row.example_id, name, row.verdict, row.created_at)
                for row, name in session.execute(query)
            ]

    def outcomes(self, task: str, round_name: str) -> list[CollectedOutcome]:
        """The round's outcomes for metrics.vmer: one per example, and one per fooled model
        for a machine proposal that fooled several."""
        query = select(CollectedExampleRow).where(
            CollectedExampleRow.task == task, CollectedExampleRow.round == round_name
        )
        with self.db.session() as session:
            return [o for row in session.scalars(query) for o in _outcomes(row)]

    def user_names(self, user_ids: set[str]) -> dict[str, str]:
        if not user_ids:
            return {}
        with self.db.session() as session:
            found = session.execute(
                select(UserRow.id, UserRow.name).where(UserRow.id.in_(user_ids))
            )
            return {uid: name for uid, name in found}

    def model_names(self, model_ids: set[str]) -> dict[str, str]:
        if not model_ids:
            return {}
        with self.db.session() as session:
            found = session.execute(
                select(ModelRow.id, ModelRow.name).where(ModelRow.id.in_(model_ids))
            )
            return {mid: name for mid, name in found}

    # -- writes ------------------------------------------------------------------------------
    def vote(self, example_id: str, voter_id: str, verdict: str) -> Settlement:
        """Cast ``voter_id``'s vote; the vote that makes ``votes_needed`` matching verdicts
        settles the example. Refused: one's own example (403), a settled one, a second vote
        by the same voter, an example not for validation or a frozen round (409)."""
        _check_verdict(verdict)
        try:
            with self.db.session() as session, session.begin():
                row = _locked(session, example_id)
                _check_open(session, row)
                if row.author_id == voter_id:
                    raise ValidationRefused(
                        "forbidden", "own_example", "a validator never judges their own example"
                    )
                _check_unsettled(row)
                if _has_voted(session, example_id, voter_id):
                    raise _already_voted()
                vote = ValidationVoteRow(
                    id=str(uuid.uuid4()),
                    example_id=example_id,
                    voter_id=voter_id,
                    verdict=verdict,
                    created_at=self.clock.now(),
                )
                session.add(vote)
                session.flush()
                tally = _tally(session, example_id)
                if tally[verdict] >= self._needed(session, row):
                    self._settle(row, verdict, SETTLED_BY_VOTES)
                return _settlement(row, tally, vote.id)
        except IntegrityError:  # the same voter's vote raced in on another connection
            raise _already_voted() from None

    def settle(self, example_id: str, settler_id: str, verdict: str) -> Settlement:
        """Settle the example directly (its task's owner or an admin: the caller checks);
        never its own author, owner and admins included, who would validate themselves."""
        _check_verdict(verdict)
        with self.db.session() as session, session.begin():
            row = _locked(session, example_id)
            if row.author_id is not None and row.author_id == settler_id:
                raise ValidationRefused(
                    "forbidden",
                    "own_example",
                    "no one settles an example they wrote: validators do",
                )
            _check_open(session, row)
            _check_unsettled(row)
            self._settle(row, verdict, settler_id)
            return _settlement(row, _tally(session, example_id))

    def _settle(self, row: CollectedExampleRow, verdict: str, by: str) -> None:
        row.verdict, row.settled_by, row.settled_at = verdict, by, self.clock.now()

    @staticmethod
    def _needed(session: Session, row: CollectedExampleRow) -> int:
        found = session.get(CollectionRoundRow, (row.task, row.round))
        return votes_needed(found.settings if found is not None else None)


def _queued(row: CollectedExampleRow) -> QueuedExample:
    return QueuedExample(
        id=row.id,
        origin=row.origin,
        inputs=dict(row.inputs or {}),
        intended=dict(row.intended or {}),
        explanation=row.explanation,
        model_id=row.model_id,
        model_answer=dict(row.model_answer) if row.model_answer is not None else None,
        fooled=row.fooled,
        fooled_models=tuple(str(m) for m in row.fooled_models or []),
        created_at=row.created_at,
    )


def _outcomes(row: CollectedExampleRow) -> list[CollectedOutcome]:
    fooled_models = [str(m) for m in row.fooled_models or []]
    if row.origin == MACHINE and fooled_models:
        return [
            CollectedOutcome(row.id, row.origin, row.author_id, model, True, row.verdict)
            for model in fooled_models
        ]
    return [
        CollectedOutcome(row.id, row.origin, row.author_id, row.model_id, row.fooled, row.verdict)
    ]


def _locked(session: Session, example_id: str) -> CollectedExampleRow:
    """The example, locked for this transaction; 404 when there is none. The UPDATE takes
    SQLite's write lock before anything is read, so no other vote reads a stale count."""
    touch = update(CollectedExampleRow).where(CollectedExampleRow.id == example_id)
    result: Any = session.execute(touch.values(id=CollectedExampleRow.id))
    if result.rowcount != 1:
        raise ValidationRefused("not_found", "unknown_example", f"no example {example_id!r}")
    row = session.get(CollectedExampleRow, example_id, populate_existing=True, with_for_update=True)
    assert row is not None
    return row


def _check_open(session: Session, row: CollectedExampleRow) -> None:
    found = session.get(CollectionRoundRow, (row.task, row.round))
    if found is not None and found.status == "frozen":
        raise ValidationRefused(
            "conflict", "round_frozen", "this round is frozen: its verdicts are final"
        )
    if not (row.fooled is True or row.origin == MACHINE):
        raise ValidationRefused(
            "conflict", "not_for_validation", "only examples that fooled a model are validated"
        )


def _check_unsettled(row: CollectedExampleRow) -> None:
    if row.verdict is not None:
        raise ValidationRefused(
            "conflict", "already_settled", f"this example is settled already ({row.verdict})"
        )


def _check_verdict(verdict: str) -> None:
    if verdict not in VERDICTS:
        raise ValidationRefused(
            "invalid", "invalid_verdict", f"a verdict is one of {', '.join(VERDICTS)}"
        )


def _has_voted(session: Session, example_id: str, voter_id: str) -> bool:
    found = session.scalars(
        select(ValidationVoteRow.id).where(
            ValidationVoteRow.example_id == example_id, ValidationVoteRow.voter_id == voter_id
        )
    ).first()
    return found is not None


def _already_voted() -> ValidationRefused:
    return ValidationRefused("conflict", "already_voted", "you have voted on this example already")


def _tally(session: Session, example_id: str) -> dict[str, int]:
    counts = dict.fromkeys(VERDICTS, 0)
    found = session.execute(
        select(ValidationVoteRow.verdict, func.count())
        .where(ValidationVoteRow.example_id == example_id)
        .group_by(ValidationVoteRow.verdict)
    )
    for verdict, count in found:
        counts[verdict] = int(count)
    return counts


def _settlement(
    row: CollectedExampleRow, tally: Mapping[str, int], vote_id: str | None = None
) -> Settlement:
    return Settlement(row.id, row.verdict, row.settled_by, row.settled_at, dict(tally), vote_id)
