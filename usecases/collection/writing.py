"""Writing an example in a collection round: checked, rate-limited per writer, answered
by a live model that sees the inputs only, judged fooled or not by the task's rule, and
stored with the answer (or why there is none)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from configs.schema import TaskSpec
from evaluator.collection import LiveModel, LiveModelError
from metrics.collection import is_fooled
from store.collection import NO_HEALTHY_MODEL, Collection, CollectionRefused, RoundState, Written
from store.ratelimits import SharedBuckets
from usecases.collection.examples import check_example
from usecases.service import Service

_WINDOW_S = 3600.0


def round_state(svc: Service, task: TaskSpec, round_name: str) -> RoundState:
    """The round's collection, or a refusal when it was never opened."""
    found = Collection(svc.db, svc.clock).state(task.name, round_name)
    if found is None:
        raise CollectionRefused(
            "not_found",
            "unknown_round",
            f"round {round_name!r} of {task.name!r} is not open for collection",
        )
    return found


def write_example(
    svc: Service, task: TaskSpec, round_name: str, body: Mapping[str, Any], author_id: str
) -> dict[str, Any]:
    """Check, rate-limit, ask the live model (inputs only), decide fooled and store; the
    page and the API share it. Raises CollectionRefused (too_many: the writer's rate)."""
    state = round_state(svc, task, round_name)
    if state.status != "open":
        raise CollectionRefused(
            "conflict", "round_not_open", f"round {round_name!r} is {state.status}"
        )
    checked = check_example(task, body, state.settings.max_field_chars)
    chosen = Collection(svc.db, svc.clock).pick(state, body.get("model_id"))
    _take_write(svc, state, author_id)
    answer, fooled, error = None, None, NO_HEALTHY_MODEL if chosen is None else None
    if chosen is not None:
        live = LiveModel(chosen.id, chosen.runtime, chosen.image_id)
        try:
            prediction = svc.live.answer(live, task, checked.inputs)
            answer = {task.output_key: prediction.output}
            fooled = is_fooled(
                task.output_type,
                checked.intended,
                prediction,
                state.settings.fooled_threshold(task.output_type, task.fooled_threshold),
                task.output_key,
            )
        except LiveModelError as exc:
            error = f"{exc.code}: {exc.message}"[:300]
    explanation = (body.get("explanation") or "").strip() or None
    written = Written(
        author_id, checked.inputs, checked.intended, explanation,
        None if chosen is None else chosen.id, answer, fooled, error, checked.slices,
    )  # fmt: skip
    example_id = Collection(svc.db, svc.clock).record(task.name, round_name, written)
    svc.live.stop_idle()  # writes are the pool's heartbeat: idle models stop here
    return {
        "id": example_id,
        "model_id": written.model_id,
        "model_answer": answer,
        "fooled": fooled,
        "unanswered": fooled is None,
        "message": _message(fooled, error),
    }


def _message(fooled: bool | None, error: str | None) -> str:
    if fooled is None:
        return (
            f"The model could not answer ({error}). Your example is kept, marked unanswered "
            "and left out of the error rates; a model that stops answering is restarted on its "
            "own within a minute, and meanwhile the next example goes to another one."
        )
    return "You fooled the model." if fooled else "The model got it right."


def _take_write(svc: Service, state: RoundState, author_id: str) -> None:
    """One of the writer's writes_per_hour for this round (429 with Retry-After)."""
    buckets = SharedBuckets(svc.db, "collect", state.settings.writes_per_hour, _WINDOW_S, svc.clock)
    wait = buckets.take(f"{state.task}/{state.round}/{author_id}")
    if wait > 0:
        seconds = max(1, int(wait + 0.999999))
        raise CollectionRefused(
            "too_many",
            "rate_limited",
            f"this round allows {state.settings.writes_per_hour} examples an hour per writer: "
            f"try again in {seconds} s",
            retry_after_s=seconds,
        )


def stop_round_models(svc: Service, state: RoundState) -> list[str]:
    """Stop the live models of a round that stopped collecting, unless another open round
    (of any task) still has them in its loop."""
    busy = Collection(svc.db, svc.clock).models_in_open_rounds(besides=(state.task, state.round))
    return svc.stop_live([m.id for m in state.models if m.id not in busy])
