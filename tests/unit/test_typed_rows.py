"""The typed rows at the evaluator -> store -> board seam say what is really there: every
key the evaluator's roll-up writes into a round and every key a board row carries is one
``RoundRow`` / ``BoardRow`` declares, and a slice report is a ``SliceRow`` key for key (mypy
checks the code against those declarations)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import get_type_hints

import pytest

from configs.vocabulary.examples import Example, Prediction
from configs.vocabulary.results import (
    ORIGINAL,
    BoardRow,
    RoundRow,
    Score,
    ScoreKey,
    SliceRow,
    pooled_variant,
)
from evaluator.scoring.rollup import AGREEMENT, summarise
from evaluator.scoring.variants import slice_scores
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


def test_a_slice_report_is_stored_as_its_declared_row_in_order() -> None:
    task = TASKS["sentiment"]
    [column] = task.slices
    labels = task.labels
    examples = [
        Example(f"u{i}", {"text": "t"}, labels[i % 2], slices={column: "ab"[i % 3 == 0]})
        for i in range(12)
    ]
    predictions = [Prediction(f"u{i}", labels[0]) for i in range(12)]
    base = ScoreKey(task.name, "r1", "test", "h", metric=task.metric)
    _, [row] = slice_scores(task, base, examples, predictions)
    # the stored JSON's keys, in the order results have always been written with
    assert list(row) == list(get_type_hints(SliceRow)) == [
        "round", "dataset", "column", "by_group", "sizes", "small_groups",
        "difference", "ratio", "worst_group", "overall",
    ]  # fmt: skip
    assert (row["round"], row["dataset"], row["column"]) == ("r1", "test", column)
    assert row["sizes"] == {"a": 8, "b": 4} and row["worst_group"] in {"a", "b"}


def test_a_stored_runtime_declares_every_field_of_every_runtime_spec() -> None:
    """``StoredRuntime`` is the JSON every ``RuntimeSpec.to_dict`` writes: its keys are the
    specs' fields and ``kind``, and its kinds and sources are theirs."""
    from dataclasses import fields
    from typing import get_args

    from configs.vocabulary.runtimes import StoredRuntime
    from evaluator.runtimes.specs import RUNTIME_SPECS, DockerSource, DockerSpec, ProcessSpec

    hints = get_type_hints(StoredRuntime)
    declared = set(StoredRuntime.__optional_keys__)
    kinds = RUNTIME_SPECS.names()
    written = {"kind"} | {f.name for kind in kinds for f in fields(RUNTIME_SPECS.get(kind))}
    assert declared == written
    assert set(get_args(hints["kind"])) == set(kinds)
    assert set(get_args(hints["source"])) == {source.value for source in DockerSource}
    stored = DockerSpec(image="dynaeval-example/cpu_1ms:latest").to_dict()
    assert set(stored) <= declared and stored["kind"] == "docker"
    assert ProcessSpec(command=("python", "m.py"), cwd=".").to_dict()["command"] == [
        "python",
        "m.py",
    ]


def test_a_leaderboard_and_its_entries_are_their_declared_dicts_in_order(tmp_path: Path) -> None:
    """The board the use cases hand out is ``Leaderboard`` key for key, its models
    ``BoardEntry`` (the JSON's order: the API's answer is unchanged), its page form
    ``PageBoard``."""
    from configs.vocabulary.boards import BoardEntry, Leaderboard, PageBoard, RoundEntry
    from dynascore.weights import Weights
    from usecases.boards.page import board as page_board
    from usecases.boards.viewing import board_for_viewer

    service = make_service(tmp_path)
    try:
        for name, performance in (("a", 80.0), ("b", 70.0)):
            axes = {"throughput": 10.0, "memory": 1.0, "robustness": 90.0, "fairness": 90.0}
            finished(service, name, {"performance": performance, **axes})
        task = service.tasks["sentiment"]
        board = board_for_viewer(service, task)
        page = page_board(service, task, Weights(dict(task.weights)), {"r1": 1.0})
    finally:
        service.close()
    assert list(board) == list(get_type_hints(Leaderboard))
    assert list(page) == list(get_type_hints(PageBoard))
    assert len(board["models"]) == 2
    for entry in board["models"]:
        assert list(entry) == list(get_type_hints(BoardEntry))
        assert all(list(one) == list(get_type_hints(RoundEntry)) for one in entry["rounds"])
