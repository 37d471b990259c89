"""Assembling a leaderboard for a viewer: the one path behind the JSON leaderboard, the
CLI's ``dynaeval leaderboard`` and the CI gate, so each gives the same ranks, Dynascores
and scores for the same request."""

from __future__ import annotations

from configs.schema import TaskSpec
from configs.vocabulary.boards import Leaderboard
from usecases.boards.assemble import requested_round_weights
from usecases.boards.cache import prepared
from usecases.boards.default_view import task_defaults
from usecases.boards.leaderboard import viewer_weights
from usecases.service import Service


def board_for_viewer(
    svc: Service,
    task: TaskSpec,
    weights: str | None = None,
    rounds: str | None = None,
    instance_memory_gib: float | None = None,
    *,
    offset: int = 0,
    limit: int | None = None,
) -> Leaderboard:
    """The board under the viewer's axis and round weights (``"axis:number,..."`` and
    ``"round:number,..."``; what they leave out comes from the task's default view, else
    the task), a page of ``limit`` models from ``offset``. ValueError names a bad weight."""
    defaults = task_defaults(svc, task)
    task = defaults.task
    chosen = viewer_weights(task, weights)
    round_weights = requested_round_weights(task, defaults.round_weights, rounds, weights)
    board = prepared(svc, task, round_weights, instance_memory_gib)
    return board.render(chosen, offset=offset, limit=limit)
