"""Submission quotas per user per task: what is left, and the 429 when nothing is."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from configs.schema import TaskSpec
from configs.vocabulary.refusals import Refused
from store.locks import named_lock
from store.quotas import Usage, charged_usage
from store.rules.principals import Principal
from usecases.service import Service


@dataclass(frozen=True)
class QuotaState:
    """A user's standing on one task at one moment."""

    task: TaskSpec
    usage: Usage
    now: datetime
    resets_at: datetime  # the next midnight UTC, when the daily count starts again
    exempt: bool

    def refusal(self) -> Refused | None:
        """The 429 one more submission would get, naming the limit; None when allowed."""
        if self.exempt:
            return None
        spec, name = self.task.quotas, self.task.name
        if spec.total is not None and self.usage.total >= spec.total:
            return Refused(
                "too_many",
                "quota_exceeded",
                f"you have used all {spec.total} submissions allowed on task {name!r} "
                "(failures the platform caused and cancelled submissions do not count)",
            )
        if spec.per_day is not None and self.usage.today >= spec.per_day:
            wait = math.ceil((self.resets_at - self.now).total_seconds())
            return Refused(
                "too_many",
                "quota_exceeded",
                f"you have used all {spec.per_day} submissions allowed per day on task "
                f"{name!r}; the daily quota resets at {_utc(self.resets_at)}",
                retry_after_s=max(1, wait),  # the total one never resets
            )
        return None

    def to_dict(self) -> dict[str, Any]:
        spec = self.task.quotas
        return {
            "task": self.task.name,
            "exempt": self.exempt,
            "daily": {
                **_left(spec.per_day, self.usage.today, self.exempt),
                "resets_at": _utc(self.resets_at),
            },
            "total": _left(spec.total, self.usage.total, self.exempt),
        }


def quota_state(service: Service, task: TaskSpec, who: Principal) -> QuotaState:
    """The caller's usage of ``task`` from the store, against the task's quotas."""
    now = service.clock.now()
    day_start = datetime(now.year, now.month, now.day)  # the clock is naive UTC
    usage = (
        charged_usage(service.db, who.user_id, task.name, day_start)
        if who.user_id
        else Usage(today=0, total=0)
    )
    return QuotaState(task, usage, now, day_start + timedelta(days=1), exempt=who.is_admin)


@contextmanager
def quota_admission(service: Service, task: TaskSpec, who: Principal) -> Iterator[None]:
    """Hold the caller's quota lock on ``task`` (in every API process) around one insert:
    the quota is checked again under the lock, so concurrent submissions cannot all pass
    it; raises its 429 when nothing is left. Admins and anonymous callers have no quota."""
    if who.is_admin or not who.user_id:
        yield
        return
    with named_lock(service.db, f"quota:{who.user_id}:{task.name}"):
        refusal = quota_state(service, task, who).refusal()
        if refusal is not None:
            raise refusal
        yield


def _left(limit: int | None, used: int, exempt: bool) -> dict[str, Any]:
    """``limit``, ``used`` and ``remaining`` (null limits and remainders mean none)."""
    if limit is None or exempt:
        return {"limit": None, "used": used, "remaining": None}
    return {"limit": limit, "used": used, "remaining": max(0, limit - used)}


def _utc(moment: datetime) -> str:
    return moment.isoformat() + "Z"
