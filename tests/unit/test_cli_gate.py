"""The pieces of ``submit``'s gate and progress bar that need no server: thresholds, the
exit code of a usage error, the bar on a terminal and its silence elsewhere."""

from __future__ import annotations

import argparse
import io
import json
from typing import Any

import pytest

from client import cli
from client.gate import EXIT_USAGE, Threshold, parse_thresholds
from client.progress import ProgressBar, progress_wanted
from client.sdk import dynabench_round_keys, metric_abbreviation
from client.submit import _verdict


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("80", [Threshold("performance", 80.0)]),
        ("performance=80", [Threshold("performance", 80.0)]),
        ("dynascore=50", [Threshold("dynascore", 50.0)]),
        ("rank=3", [Threshold("rank", 3.0)]),
        (
            "performance=80, Robustness=70",
            [Threshold("performance", 80.0), Threshold("robustness", 70.0)],
        ),
    ],
)
def test_thresholds_parse(text: str, expected: list[Threshold]) -> None:
    assert parse_thresholds(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "memory=1", "bleu=3", "x", "performance=", "fairness=inf", "",
        # a gate that cannot fail (the board's worst scores 0) or cannot pass
        "dynascore=0", "dynascore=-2.5", "dynascore=101", "rank=0", "rank=1.5",
    ],
)  # fmt: skip
def test_bad_thresholds_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_thresholds(text)


class _Board:
    """A backend whose board ranks the model 3rd with a score of 40."""

    def board_entry(self, found: dict[str, Any]) -> dict[str, Any]:
        return {"model_id": found["id"], "rank": 3, "score": 40.0, "dynascore": 34350.28}


@pytest.mark.parametrize(
    ("gate", "code"),
    [("rank=3", 0), ("rank=2", 1), ("dynascore=40", 0), ("dynascore=40.5", 1)],
)
def test_board_gates_read_the_rank_and_the_readable_score(
    gate: str, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    args = argparse.Namespace(json=True, compare_to=None)
    found = {"id": "m1", "task": "t", "job": {"status": "done"}, "results": {}}
    assert _verdict(args, _Board(), found, parse_thresholds(gate)) == code  # type: ignore[arg-type]
    shown = json.loads(capsys.readouterr().out)
    metric = gate.partition("=")[0]
    assert shown["gate"]["thresholds"][0]["value"] == (3.0 if metric == "rank" else 40.0)
    assert shown["gate"]["thresholds"][0]["metric"] == metric


def test_submit_usage_errors_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.build_parser().parse_args(["submit", "m", "--task", "t", "--name", "n",
                                       "--fail-under", "memory=2"])  # fmt: skip
    assert exited.value.code == EXIT_USAGE
    assert "--fail-under" in capsys.readouterr().err
    with pytest.raises(SystemExit) as other:  # other commands keep argparse's 2
        cli.build_parser().parse_args(["leaderboard"])
    assert other.value.code == 2


def test_submit_help_states_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["submit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for part in ("0 submitted", "1 below a --fail-under", "2 the evaluation failed", "3 bad usage"):
        assert part in text


def test_progress_bar_draws_on_a_terminal() -> None:
    screen = io.StringIO()
    screen.isatty = lambda: True  # type: ignore[method-assign]
    with ProgressBar("sentiment", file=screen) as bar:
        bar.update(0.5, "round r2 / test: typo")
        bar.show_submission({"job": {"status": "running", "progress": 0.75, "stage": "r3"}})
    drawn = screen.getvalue()
    assert "sentiment" in drawn and "%" in drawn


def test_disabled_progress_bar_draws_nothing() -> None:
    screen = io.StringIO()
    with ProgressBar("sentiment", enabled=False, file=screen) as bar:
        bar.update(0.5, "stage")
    assert screen.getvalue() == ""


def test_progress_only_on_a_terminal_and_never_with_json(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert progress_wanted(json_output=False) is True
    assert progress_wanted(json_output=True) is False
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert progress_wanted(json_output=False) is False


def test_dynabench_round_keys() -> None:
    assert [metric_abbreviation(m) for m in ("accuracy", "macro_f1", "squad_f1", "x")] == [
        "acc",
        "f1",
        "f1",
        "x",
    ]
    results = {
        "metric": "accuracy",
        "rounds": [
            {"round": "r1", "performance": 71.0, "robustness": 90.0, "fairness": 80.0},
            {"round": "dev-2", "performance": 64.5},
        ],
    }
    assert dynabench_round_keys(results) == {
        "round1_acc": 71.0,
        "round1_robustness": 90.0,
        "round1_fairness": 80.0,
        "round2_acc": 64.5,
    }
