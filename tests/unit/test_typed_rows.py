"""The typed rows at the evaluator -> store -> board seam say what is really there: every
key the evaluator's roll-up writes into a round and every key a board row carries is one
``RoundRow`` / ``BoardRow`` declares (mypy checks the code against those declarations)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import get_type_hints

import pytest

from configs.vocabulary.results import (
    ORIGINAL,
    BoardRow,
    RoundRow,
    Score,
    ScoreKey,
    pooled_variant,
)
from evaluator.scoring.rollup import AGREEMENT, summarise
from evaluator.tasks import load_tasks
from tests.unit.test_api import finished, make_service

TASKS = load_tasks()


def scores_of(task_name: str) -> list[Score]:
    task, draw = TASKS[task_name], random.Random(7)
    made = []
    for spec in task.rounds:
        for dataset in spec.datasets:
            original = ScoreKey(
                task.name, spec.name, dataset.name, "h", variant=ORIGINAL, metric=task.metric
            )
            made.append(Score(original, draw.uniform(0, 100), 50, 40.0, 60.0))
            for variant in (pooled_variant("robustness"), pooled_variant("fairness"), "typo"):
                made.append(
                    Score(
                        ScoreKey(
                            task.name,
                            spec.name,
                            dataset.name,
                            "h",
                            variant=variant,
                            metric=AGREEMENT,
                        ),
                        draw.uniform(0, 100),
                        30,
                    )  # fmt: skip
                )
    return made


@pytest.mark.parametrize("task_name", sorted(TASKS))
def test_every_round_key_the_rollup_writes_is_declared(task_name: str) -> None:
    summary, rounds = summarise(TASKS[task_name], scores_of(task_name), {})
    declared = set(get_type_hints(RoundRow))
    for row in rounds:
        assert set(row) <= declared, set(row) - declared
    assert set(summary) <= set(get_type_hints(BoardRow)), set(summary) - set(
        get_type_hints(BoardRow)
    )


def test_every_key_of_a_board_row_is_declared(tmp_path: Path) -> None:
    service = make_service(tmp_path)
    try:
        finished(service, "m", {"performance": 80.0, "throughput": 10.0, "memory": 1.0,
                                "robustness": 70.0, "fairness": 90.0})  # fmt: skip
        [row] = service.queries.leaderboard_rows("sentiment")
        assert set(row) <= set(get_type_hints(BoardRow)), set(row) - set(get_type_hints(BoardRow))
    finally:
        service.close()
