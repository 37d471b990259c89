"""The job lifecycle as data: statuses, allowed transitions, and the retry decision (a pure
function of the failure, the attempt and the time, so every caller decides alike)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from configs.vocabulary.failures import is_platform_fault


class JobStatus(StrEnum):
    """Where a job is. ``done`` and ``failed`` are final."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"

    @property
    def final(self) -> bool:
        return self in (JobStatus.DONE, JobStatus.FAILED)


class JobKind(StrEnum):
    """What a job does: evaluate one model (all of it, or a backfill's one dataset), or run
    the automated adversary against a round's models."""

    EVALUATE = "evaluate"
    ADVERSARY = "adversary"


@dataclass(frozen=True)
class BackfillScope:
    """A backfill's dataset versions, ``(round, dataset, dataset_hash)`` each: the job sends
    the model these and keeps the rest of its newest result (other sets, the profile)."""

    sets: tuple[tuple[str, str, str], ...]

    def to_dict(self) -> dict[str, Any]:
        keys = ("round", "dataset", "dataset_hash")
        return {"sets": [dict(zip(keys, version, strict=True)) for version in self.sets]}

    @classmethod
    def of(cls, spec: Mapping[str, Any] | None) -> BackfillScope | None:
        """The scope a job's stored spec holds, if any."""
        scope = (spec or {}).get("scope")
        if not scope:
            return None
        return cls(
            tuple(
                (str(s["round"]), str(s["dataset"]), str(s["dataset_hash"])) for s in scope["sets"]
            )
        )


@dataclass(frozen=True)
class Seed:
    """An example the owner of an adversary run gave it to start from (checked as a
    written example is): its input fields and the output they intend."""

    inputs: Mapping[str, str]
    intended: Mapping[str, Any]


@dataclass(frozen=True)
class AdversaryRun:
    """An adversary job's spec: the round its proposals join, the attack's settings (as
    evaluator.adversary's AdversarySettings reads them), the target models and the seeds."""

    round: str
    attack: Mapping[str, Any]
    models: tuple[str, ...]
    seeds: tuple[Seed, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        seeds = [{"inputs": dict(s.inputs), "intended": dict(s.intended)} for s in self.seeds]
        return {
            "attack": dict(self.attack),
            "models": list(self.models),
            "seeds": seeds,
            "round": self.round,
        }

    @classmethod
    def of(cls, spec: Mapping[str, Any] | None) -> AdversaryRun | None:
        """The run a job's stored spec holds, if it holds one."""
        if not spec or "attack" not in spec:
            return None
        return cls(
            str(spec["round"]),
            dict(spec["attack"]),
            tuple(str(m) for m in spec["models"]),
            tuple(Seed(dict(s["inputs"]), dict(s["intended"])) for s in spec.get("seeds") or ()),
        )


@dataclass(frozen=True)
class AdversaryCheckpoint:
    """Where an adversary run stands after a source, as its job stores it: the next source's
    index in the seeded order, the queries used, the proposals made, the models dropped
    (id -> why) and, once the run has ended, why it stopped (``evaluator.adversary.STOPPED``)."""

    next_source: int = 0
    queries_used: int = 0
    proposals: int = 0
    failed_models: Mapping[str, str] = field(default_factory=dict)
    stopped_because: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "next_source": self.next_source,
            "queries_used": self.queries_used,
            "proposals": self.proposals,
            "failed_models": dict(self.failed_models),
        }
        if self.stopped_because is not None:
            data["stopped_because"] = self.stopped_because
        return data

    @classmethod
    def of(cls, stored: Mapping[str, Any] | None) -> AdversaryCheckpoint | None:
        """The checkpoint a job stored, None if it stored none; ValueError or TypeError
        when what it stored is not one."""
        if not stored:
            return None
        stopped, failed = stored.get("stopped_because"), stored.get("failed_models") or {}
        if not isinstance(failed, Mapping):
            raise TypeError(f"failed_models is a {type(failed).__name__}, not an object")
        return cls(
            int(stored.get("next_source", 0)),
            int(stored.get("queries_used", 0)),
            int(stored.get("proposals", 0)),
            {str(k): str(v) for k, v in failed.items()},
            None if stopped is None else str(stopped),
        )


@dataclass(frozen=True)
class UnreadableSpec:
    """A stored spec its kind cannot read (no release of ours wrote it): the worker fails
    the job with ``reason``; the claim itself must not fail, or the job would stay at the
    head of the queue and stop every worker."""

    reason: str


JobSpec = BackfillScope | AdversaryRun | UnreadableSpec | None  # what a kind needs


def job_spec(kind: JobKind, stored: Mapping[str, Any] | None) -> JobSpec:
    """A job's stored spec, typed by its kind."""
    try:
        if kind is JobKind.ADVERSARY:
            return AdversaryRun.of(stored)
        return BackfillScope.of(stored)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return UnreadableSpec(f"the job's stored spec cannot be read ({exc!r:.200})")


def job_checkpoint(kind: JobKind, stored: Mapping[str, Any] | None) -> AdversaryCheckpoint | None:
    """Where a job's earlier attempts got to, typed by its kind: only an adversary run keeps
    a checkpoint. One that cannot be read is as none: the run starts again from its first
    source, which proposes nothing twice (a proposal's id is its source's), where failing
    the claim would stop every worker at the head of the queue."""
    if kind is not JobKind.ADVERSARY:
        return None
    try:
        return AdversaryCheckpoint.of(stored)
    except (TypeError, ValueError, AttributeError, OverflowError):  # int(inf): OverflowError
        return None


class AttemptOutcome(StrEnum):
    """How one attempt (one claim) ended, as job_attempts keeps it."""

    DONE = "done"
    FAILED = "failed"
    LOST = "lost"  # its worker died: its lease expired, or its restart settled it
    CANCELLED = "cancelled"
    HANDED_BACK = "handed_back"  # its worker stopped and gave the job back, uncharged


TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.QUEUED: frozenset({JobStatus.RUNNING, JobStatus.FAILED}),
    # running → queued: a platform fault or a lost worker, retried while attempts remain
    JobStatus.RUNNING: frozenset({JobStatus.DONE, JobStatus.FAILED, JobStatus.QUEUED}),
    JobStatus.DONE: frozenset({JobStatus.QUEUED}),  # re-scoring when a round is added
    JobStatus.FAILED: frozenset({JobStatus.QUEUED}),  # an operator's explicit retry
}


class IllegalTransition(ValueError):
    """A status change the lifecycle does not allow."""


def check_transition(current: str, new: str) -> JobStatus:
    """The new status, or IllegalTransition naming both ends."""
    source, target = JobStatus(current), JobStatus(new)
    if target not in TRANSITIONS[source]:
        raise IllegalTransition(f"a job cannot go from {source} to {target}")
    return target


@dataclass(frozen=True)
class Settlement:
    """Where a failed attempt leaves its job: queued again from ``available_at``, or failed
    for good (then ``available_at`` is None)."""

    status: JobStatus
    available_at: datetime | None
    stage: str


@dataclass(frozen=True)
class RetryPolicy:
    """Platform faults are retried with exponential back-off from a budget of their own
    (``platform_budget`` faults per job), so our crashes never spend the submitter's attempts;
    what the submission caused is final (retrying cannot fix it, and it must not cost more
    runs), and so is a cancel (not the submitter's fault, but a choice)."""

    first_delay_s: float = 5.0
    max_delay_s: float = 300.0
    platform_budget: int = 5  # platform faults one job may suffer before it fails for good

    def retries(self, code: str, platform_faults: int = 0) -> bool:
        """Whether a job whose attempt ended with ``code`` runs again; ``platform_faults``
        counts the platform faults it suffered before this one."""
        # Only the platform's faults run again (an unknown code is our bug, so ours too): a
        # cancel was someone's choice, a gone image no attempt brings back, and what the
        # submission caused no rerun fixes.
        return is_platform_fault(code) and platform_faults + 1 < self.platform_budget

    def delay(self, attempt: int) -> timedelta:
        """5 s, 10 s, 20 s, ... after attempts 1, 2, 3, ..., capped at 5 minutes."""
        exponent = min(max(0, attempt - 1), 32)  # past 2**32 the cap holds anyway
        return timedelta(seconds=min(self.max_delay_s, self.first_delay_s * 2**exponent))

    def decide(
        self, code: str, attempt: int, now: datetime, *, platform_faults: int = 0
    ) -> Settlement:
        """The settlement of a job whose ``attempt`` failed with ``code`` at ``now``, after
        ``platform_faults`` earlier platform faults. The submitter's attempts play no part:
        what they caused is final, and only the platform's budget allows another run."""
        if self.retries(code, platform_faults):
            return Settlement(JobStatus.QUEUED, now + self.delay(attempt), f"retrying after {code}")
        return Settlement(JobStatus.FAILED, None, "failed")


DEFAULT_RETRY_POLICY = RetryPolicy()
