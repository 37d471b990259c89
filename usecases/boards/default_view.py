"""A task's default view: the weights its leaderboard (API and page) uses when the viewer
gives none. Without one, the task's configured weights."""

from __future__ import annotations

from dataclasses import dataclass, replace

from configs.schema import TaskSpec
from store.views import SavedView, Views
from usecases.service import Service


@dataclass(frozen=True)
class Defaults:
    """The task with the default view's axis weights as its own, and the view's round
    weights (None: the task's configured ones)."""

    task: TaskSpec
    round_weights: dict[str, float] | None
    view: SavedView | None


def task_defaults(service: Service, task: TaskSpec) -> Defaults:
    view = Views(service.db, service.clock).default_view(task.name)
    if view is None:
        return Defaults(task, None, None)
    # Only the axis weights move into the spec: the round specs stay the configured ones,
    # which is what the stored rows were rolled up with (usecases.boards.assemble.reweighted).
    return Defaults(replace(task, weights=dict(view["weights"])), _rounds(task, view), view)


def _rounds(task: TaskSpec, view: SavedView) -> dict[str, float] | None:
    """The view's round weights over the task's rounds now: a round added after the view
    was saved keeps its configured weight, a round gone is dropped."""
    saved = view["round_weights"]
    weights = {spec.name: float(saved.get(spec.name, spec.weight)) for spec in task.rounds}
    return weights if any(weights.values()) else None
