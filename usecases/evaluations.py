"""Evaluating a submission again, or stopping its evaluation: the submitter, the task's
owner or an admin may; those who may see the submission but not act on it are refused as
``forbidden``, those who may not see it as ``not_found`` (the same as a guess)."""

from __future__ import annotations

from dataclasses import dataclass

from configs.vocabulary.refusals import Refused
from store.accounts import Accounts
from store.jobs import AlreadyQueued
from store.rules.principals import Principal
from usecases.quotas import quota_state
from usecases.service import Service


@dataclass(frozen=True)
class Rerun:
    model_id: str
    job_id: str


@dataclass(frozen=True)
class Cancelled:
    model_id: str
    job_id: str
    was: str | None  # the job's status before


def rerun(svc: Service, who: Principal, model_id: str) -> Rerun:
    """A failed job is retried in place with a fresh budget of attempts; a finished one gets
    a new job. A submitter's own rerun is a submission's worth of their quota (an operator's
    is nobody's)."""
    task_name, operator = _acting_on(svc, who, model_id)
    if not operator:
        task = svc.tasks.get(task_name)
        refusal = quota_state(svc, task, who).refusal() if task is not None else None
        if refusal is not None:
            raise refusal
    try:
        return Rerun(model_id, svc.store.rerun(model_id))
    except AlreadyQueued as exc:
        raise Refused("conflict", "already_queued", str(exc)) from None


def cancel(svc: Service, who: Principal, model_id: str) -> Cancelled:
    """A queued job ends at once; a running one ends now and its worker stops at its next
    step. It fails with code ``cancelled``, never retried nor counted against anyone."""
    _acting_on(svc, who, model_id)
    outcome = svc.store.cancel(model_id, f"cancelled by {who.name}")
    if not outcome.cancelled or outcome.job_id is None:
        ended = outcome.status or "never queued"
        raise Refused(
            "conflict", "already_final", f"submission {model_id!r} has no job to cancel ({ended})"
        )
    return Cancelled(model_id, outcome.job_id, outcome.status)


def _acting_on(svc: Service, who: Principal, model_id: str) -> tuple[str, bool]:
    """The submission's task, and whether ``who`` acts as its operator (the task's owner
    or an admin) rather than as its submitter."""
    found = Accounts(svc.db, svc.clock).model_access(model_id)
    if found is None or not who.may_see_model(*found):
        raise Refused("not_found", "unknown_submission", f"no submission {model_id!r}")
    task_name, owner_id = found
    operator = who.is_admin or task_name in who.owned_tasks
    if not operator and owner_id != who.user_id:
        raise Refused("forbidden", "not_owner", "only the submitter, the task's owner or an admin")
    return task_name, operator
