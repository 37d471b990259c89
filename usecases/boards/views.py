"""Saving a view (named axis and round weights with a stable address) and freezing a
snapshot (the leaderboard JSON as it is now, with its weights, data and code version), for
the API, the pages' forms and anything else that saves one."""

from __future__ import annotations

from collections.abc import Mapping

from configs.schema import TaskSpec
from configs.vocabulary.boards import Leaderboard
from configs.vocabulary.refusals import Refused
from dynascore.weights import Weights
from evaluator.provenance import code_version
from store.views import NewSnapshot, NewView, SavedSnapshot, SavedView, Views
from usecases.boards import assemble as boards
from usecases.boards.cache import prepared
from usecases.service import Service


def checked_weights(
    task: TaskSpec, axes: Mapping[str, float], rounds: Mapping[str, float]
) -> tuple[dict[str, float], dict[str, float]]:
    """Full axis and round weights: the task's defaults overridden by those given, checked
    as the leaderboard checks its query (``invalid_weights`` otherwise)."""
    try:
        weights = Weights({**task.weights, **axes}).to_dict()
        round_weights = boards.parse_round_weights(task, boards.weights_text(rounds))
    except ValueError as exc:
        raise Refused("invalid", "invalid_weights", str(exc)) from None
    return weights, round_weights


def save_view(
    svc: Service,
    task: TaskSpec,
    name: str,
    weights: Mapping[str, float],
    round_weights: Mapping[str, float],
    owner_id: str | None,
) -> SavedView:
    """Store a view of ``task`` with full (checked) weights; the stored view."""
    axes, rounds = checked_weights(task, weights, round_weights)
    return Views(svc.db, svc.clock).create_view(NewView(task.name, name, axes, rounds, owner_id))


def frozen_leaderboard(
    svc: Service, task: TaskSpec, weights: Mapping[str, float], round_weights: Mapping[str, float]
) -> Leaderboard:
    """The leaderboard JSON the API gives now for these weights (as ``GET .../leaderboard``)."""
    return prepared(svc, task, round_weights).render(Weights(dict(weights)))


def take_snapshot(
    svc: Service,
    task: TaskSpec,
    weights: Mapping[str, float],
    round_weights: Mapping[str, float],
    owner_id: str | None,
) -> SavedSnapshot:
    """Store the task's leaderboard as it is now under these (checked) weights."""
    axes, rounds = checked_weights(task, weights, round_weights)
    new = NewSnapshot(
        task=task.name,
        leaderboard=frozen_leaderboard(svc, task, axes, rounds),
        weights=axes,
        round_weights=rounds,
        dataset_hashes=dict(svc.dataset_hashes(task.name)),
        code_version=code_version(),
        owner_id=owner_id,
    )
    return Views(svc.db, svc.clock).create_snapshot(new)
