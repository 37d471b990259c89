"""One set of round weights gives one number, bit for bit, whatever order a caller's
mapping holds them in: a saved view's weights, a query string's and the task's own may list
the rounds differently, and the board cache keys them sorted, so the first request's order
must not decide what everyone after it sees (floating-point sums depend on their order)."""

from __future__ import annotations

from dataclasses import replace

from configs.schema import RoundSpec
from evaluator.tasks import load_tasks
from usecases.boards.assemble import reweighted

BASE = load_tasks()["sentiment"]
TASK = replace(
    BASE,
    rounds=tuple(
        RoundSpec(name, BASE.rounds[0].datasets, weight)
        for name, weight in (("r1", 1.4), ("r2", 0.9), ("r3", 0.2))
    ),  # fmt: skip
)
# found by search: summed r1, r2, r3 these give 23.116400000000002; summed r3, r2, r1 23.1164
VALUES = {"r1": 23.31, "r2": 23.09, "r3": 21.88}


def test_a_mean_over_rounds_is_the_same_float_in_any_order_of_the_weights() -> None:
    row = {
        "model_id": "m",
        "performance": 0.0,
        "rounds": [{"round": name, "performance": value} for name, value in VALUES.items()],
    }
    in_task_order = {"r1": 1.4, "r2": 0.9, "r3": 0.2}
    backwards = dict(reversed(in_task_order.items()))
    [ours] = reweighted([row], in_task_order, TASK)
    [theirs] = reweighted([row], backwards, TASK)
    assert ours["performance"] == theirs["performance"]
    assert repr(ours["performance"]) == repr(theirs["performance"])
