"""Starting an adversary run: the automated search for examples that fool a round's
live models, queued for a worker, seeded only from what is not held out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from configs.schema import TaskSpec
from configs.vocabulary.jobs import AdversaryRun, Seed
from configs.vocabulary.refusals import Refused
from evaluator.adversary import AdversarySettings
from store.adversary import AdversaryRefused, AdversaryRuns, AdversaryRunState
from store.collection import Collection
from store.rules.loop_models import LoopModel
from usecases.collection.examples import check_example
from usecases.service import Service


@dataclass(frozen=True)
class AdversaryRequest:
    """What the owner asked for: the search's options (``AdversarySettings``'s fields), their own
    seed examples and how many of the round's best models to attack."""

    options: Mapping[str, Any]
    seeds: tuple[Any, ...] = ()
    top_models: int = 2


def targets(svc: Service, task: TaskSpec, models: Sequence[LoopModel], count: int) -> list[str]:
    """The ``count`` best healthy models by their newest performance (ties by id)."""
    board = {row["model_id"]: row for row in svc.queries.leaderboard_rows(task.name)}

    def rank(model: LoopModel) -> tuple[float, str]:
        performance = board.get(model.id, {}).get("performance")
        return (-(performance if isinstance(performance, int | float) else float("-inf")), model.id)

    return [m.id for m in sorted(models, key=rank)[:count]]


def start_run(
    svc: Service, task: TaskSpec, round_name: str, request: AdversaryRequest
) -> AdversaryRunState:
    """Queue an adversary run on a round open for collection, against its best healthy
    models, from the owner's seeds and the round's written examples (never held-out data)."""
    collection = Collection(svc.db, svc.clock)
    state = collection.state(task.name, round_name)
    if state is None:
        raise AdversaryRefused(
            "not_found", "unknown_round", f"round {round_name!r} was never opened for collection"
        )
    if state.status != "open":
        raise AdversaryRefused(
            "conflict", "round_not_open", f"round {round_name!r} is {state.status}"
        )
    healthy = state.healthy()
    if not healthy:
        raise AdversaryRefused(
            "conflict", "no_healthy_model", "no in-the-loop model of this round is healthy"
        )
    seeds = tuple(_seed(task, seed, state.settings.max_field_chars) for seed in request.seeds)
    if not seeds and not collection.written_examples(task.name, round_name):
        raise AdversaryRefused(
            "conflict", "no_sources", "the adversary starts from the round's written examples or the "
            "seeds you send, never from held-out data: write examples or send seeds first",
        )  # fmt: skip
    try:
        options = {**request.options, "operators": tuple(request.options["operators"])}
        spec = AdversarySettings(**options, name_swaps=bool(task.fairness))
    except (TypeError, ValueError, KeyError) as exc:
        raise AdversaryRefused("invalid", "invalid_attack", str(exc)) from None
    models = targets(svc, task, healthy, request.top_models)
    runs = AdversaryRuns(svc.db, svc.clock)
    job_id = runs.start(task.name, AdversaryRun(round_name, spec.to_dict(), tuple(models), seeds))
    return next(run for run in runs.runs(task.name, round_name) if run.job_id == job_id)


def _seed(task: TaskSpec, body: Any, max_chars: int) -> Seed:
    """One seed checked as a written example is (fields, label or span): 422 otherwise."""
    if not isinstance(body, dict):
        raise AdversaryRefused("invalid", "invalid_example", "seeds: each seed is an object")
    try:
        checked = check_example(task, body, max_chars)
    except Refused as exc:
        raise Refused(exc.kind, exc.code, f"seeds: {exc.message}") from None
    return Seed(dict(checked.inputs), dict(checked.intended))
