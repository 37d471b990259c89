"""Adversary runs: jobs of a collection round (not of a model) that propose examples.

A run is a ``JobKind.ADVERSARY`` job: it is queued, claimed, leased, retried and recovered
like any job, below new submissions. Its progress is durable: after each source example the
worker stores the checkpoint (the next source, the queries used) and that source's proposals
in one transaction, under the lease check, so a crash or a lost worker costs at most the
source in flight, and a retry resumes where the last attempt stopped. A proposal's id is
derived from the round and its source, so writing it twice stores it once.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from configs.vocabulary.clock import SYSTEM_CLOCK, Clock
from configs.vocabulary.jobs import (
    AdversaryCheckpoint,
    AdversaryRun,
    JobKind,
    JobStatus,
    job_checkpoint,
)
from configs.vocabulary.refusals import Refused
from store.backfill import BACKFILL_PRIORITY
from store.db import Database
from store.leases import DEFAULT_ATTEMPTS, held
from store.models import CollectedExampleRow, JobRow

MACHINE = "machine"
_PROPOSALS = uuid.UUID("6f1c2d0e-4b0a-4f57-9a53-1d2c8e7b9a10")  # namespace of proposal ids


class AdversaryRefused(Refused):
    """An adversary run refused (see configs.vocabulary.refusals)."""


@dataclass(frozen=True)
class MachineProposal:
    """A candidate the search found, as the validation queue stores it."""

    source_uid: str
    inputs: Mapping[str, str]
    intended: Mapping[str, Any]
    fooled_models: Sequence[str]
    answers: Mapping[str, Mapping[str, Any]]  # model id -> its answer ({"label": ...})


@dataclass(frozen=True)
class AdversaryRunState:
    """A run as the API shows it."""

    job_id: str
    task: str
    round: str
    status: str
    stage: str
    spec: Mapping[str, Any]
    checkpoint: AdversaryCheckpoint | None  # None until its first source is done
    created_at: datetime
    failure: str | None


def proposal_id(task: str, round_name: str, source_uid: str) -> str:
    """One proposal per source and round, whatever attempt or run finds it."""
    return str(uuid.uuid5(_PROPOSALS, f"{task}\x1f{round_name}\x1f{source_uid}"))


class AdversaryRuns:
    """Adversary runs on one database and clock."""

    def __init__(self, db: Database, clock: Clock = SYSTEM_CLOCK) -> None:
        self.db, self.clock = db, clock

    def start(self, task: str, run: AdversaryRun) -> str:
        """Queue ``run`` (its round, the attack's settings, its models and seeds);
        AdversaryRefused (409) while another run of the round waits or runs."""
        round_name = run.round
        now = self.clock.now()
        with self.db.session() as session, session.begin():
            if self._active(session, task, round_name):
                raise AdversaryRefused(
                    "conflict", "attack_running", f"an adversary run of round {round_name!r} is queued "
                    "or running: wait for it to end",
                )  # fmt: skip
            job = JobRow(
                id=str(uuid.uuid4()), model_id=None, task=task, kind=JobKind.ADVERSARY,
                spec=run.to_dict(), checkpoint=None, status=JobStatus.QUEUED,
                attempts=0, max_attempts=DEFAULT_ATTEMPTS, priority=BACKFILL_PRIORITY,
                available_at=now, progress=0.0, stage="queued: adversary run", created_at=now,
            )  # fmt: skip
            session.add(job)
        return job.id

    def runs(self, task: str, round_name: str) -> list[AdversaryRunState]:
        """The round's runs, newest first."""
        with self.db.session() as session:
            rows = session.scalars(
                select(JobRow)
                .where(JobRow.task == task, JobRow.kind == JobKind.ADVERSARY)
                .order_by(JobRow.created_at.desc())
            ).all()
            return [_run(row) for row in rows if (row.spec or {}).get("round") == round_name]

    def save_progress(
        self,
        job_id: str,
        worker: str,
        lease: str,
        checkpoint: AdversaryCheckpoint,
        proposals: Sequence[MachineProposal],
    ) -> bool:
        """Store ``proposals`` and the ``checkpoint`` they lead to, in one transaction, if
        the claim still holds the job (False: it was lost, nothing is written)."""
        now = self.clock.now()
        with self.db.session() as session, session.begin():
            job = held(session, job_id, worker, lease)
            if job is None:
                return False
            round_name = str((job.spec or {})["round"])
            for proposal in proposals:
                example_id = proposal_id(job.task, round_name, proposal.source_uid)
                if session.get(CollectedExampleRow, example_id) is None:
                    session.add(_example_row(example_id, job.task, round_name, proposal, now))
            job.checkpoint = checkpoint.to_dict()
        return True

    @staticmethod
    def _active(session: Any, task: str, round_name: str) -> bool:
        rows = session.scalars(
            select(JobRow).where(
                JobRow.task == task,
                JobRow.kind == JobKind.ADVERSARY,
                JobRow.status.in_((JobStatus.QUEUED, JobStatus.RUNNING)),
            )
        ).all()
        return any((row.spec or {}).get("round") == round_name for row in rows)


def _example_row(
    example_id: str, task: str, round_name: str, proposal: MachineProposal, now: datetime
) -> CollectedExampleRow:
    first = proposal.fooled_models[0] if proposal.fooled_models else None
    return CollectedExampleRow(
        id=example_id, task=task, round=round_name, origin=MACHINE, author_id=None,
        inputs=dict(proposal.inputs), intended=dict(proposal.intended), explanation=None,
        model_id=first, model_answer=proposal.answers.get(first) if first else None,
        fooled=bool(proposal.fooled_models), fooled_models=list(proposal.fooled_models),
        source_uid=proposal.source_uid, created_at=now,
    )  # fmt: skip


def _run(row: JobRow) -> AdversaryRunState:
    return AdversaryRunState(
        job_id=row.id,
        task=row.task,
        round=str((row.spec or {}).get("round")),
        status=JobStatus(row.status).value,
        stage=row.stage,
        spec=dict(row.spec or {}),
        checkpoint=job_checkpoint(JobKind.ADVERSARY, row.checkpoint),  # unreadable: none
        created_at=row.created_at,
        failure=row.failure_message,
    )
