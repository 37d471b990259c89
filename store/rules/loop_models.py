"""Which in-the-loop model answers a writer's next example: the one asked for when it may
answer, else the healthy model (or one due for a restart) that has answered least in the
round, so writes spread over the loop and one crashed model never blocks the round."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from configs.vocabulary.runtimes import StoredRuntime

RESTART_AFTER_S = 60.0  # a model that stopped answering is tried again (started anew) after


@dataclass(frozen=True)
class LoopModel:
    """An in-the-loop model: its name and, when it stopped answering, why."""

    id: str
    name: str
    runtime: StoredRuntime
    image_id: str | None
    unhealthy: str | None = None
    unhealthy_since: datetime | None = None  # None with a reason: marked before times were kept

    def due_for_restart(self, now: datetime) -> bool:
        """Healthy, or marked long enough ago to be started anew and asked again."""
        if self.unhealthy is None or self.unhealthy_since is None:
            return True
        return (now - self.unhealthy_since).total_seconds() >= RESTART_AFTER_S


def choose_model(
    models: Sequence[LoopModel],
    wanted: str | None,
    now: datetime,
    answered: Mapping[str, int],
) -> LoopModel | None:
    """The model to answer next: ``wanted`` (one of ``models``) when it may answer, else the
    one that has ``answered`` least among those that may (ties: the loop's order); None
    when none may."""
    if wanted is not None:
        chosen = next((m for m in models if m.id == wanted), None)
        if chosen is not None and chosen.due_for_restart(now):
            return chosen
    ready = [m for m in models if m.due_for_restart(now)]
    if not ready:
        return None
    return min(ready, key=lambda m: answered.get(m.id, 0))
