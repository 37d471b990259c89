"""The ``dynaeval`` command line as a user runs it: help, tasks, evaluate, dynascore,
submit + worker --burst, status. Exit codes: 0 ok, 1 gate failed, 2 usage error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.acceptance.conftest import Run
from tests.unit.test_api import image_tar

SUBCOMMANDS = [
    "serve",
    "worker",
    "tasks",
    "evaluate",
    "submit",
    "leaderboard",
    "dynascore",
    "status",
    "rescore",
]
AXES = ["performance", "throughput", "memory", "robustness", "fairness"]
LEXICON = "examples/models/sentiment_lexicon/model.py"
MAJORITY = "examples/models/majority/model.py"


def test_top_level_help_lists_every_subcommand(run: Run) -> None:
    done = run("--help")
    assert done.returncode == 0, done.stderr
    for name in SUBCOMMANDS:
        assert name in done.stdout


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_has_help(run_process: Run, command: str) -> None:
    """Each subcommand once as a real process: the console script and its imports."""
    done = run_process(command, "--help")
    assert done.returncode == 0, done.stderr
    assert f"usage: dynaeval {command}" in done.stdout


def test_no_subcommand_is_a_usage_error(run: Run) -> None:
    done = run()
    assert done.returncode == 2 and "usage:" in done.stderr


def test_tasks_json(run: Run) -> None:
    done = run("tasks", "--json")
    assert done.returncode == 0, done.stderr
    tasks = {t["name"]: t for t in json.loads(done.stdout)}
    assert {"sentiment", "nli", "qa", "hate_speech"} <= set(tasks)
    assert [r["name"] for r in tasks["sentiment"]["rounds"]] == ["r1", "r2", "r3"]
    plain = run("tasks")
    assert plain.returncode == 0 and "sentiment" in plain.stdout


@pytest.mark.slow
def test_evaluate_json_has_every_axis_round_and_provenance(run: Run) -> None:
    done = run("evaluate", LEXICON, "--task", "sentiment", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert {"task", "status", *AXES, "rounds", "provenance"} <= set(result)
    assert result["task"] == "sentiment" and result["status"] == "done"
    for axis in AXES:
        assert isinstance(result[axis], float), axis
    assert [r["round"] for r in result["rounds"]] == ["r1", "r2", "r3"]
    assert all(isinstance(r["performance"], float) for r in result["rounds"])
    provenance = result["provenance"]
    assert set(provenance["dataset_hashes"]) == {"r1/test", "r2/test", "r3/test"}
    assert all(len(h) == 64 for h in provenance["dataset_hashes"].values())
    assert provenance["code_version"]


@pytest.mark.slow
def test_evaluate_fail_under_gates_with_exit_1(run: Run) -> None:
    done = run("evaluate", MAJORITY, "--task", "sentiment", "--json", "--fail-under", "101")
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["status"] == "done"  # the JSON is still there to archive
    assert "under 101" in done.stderr


def test_evaluate_unknown_task_exits_2_with_one_line(run: Run) -> None:
    done = run("evaluate", LEXICON, "--task", "no-such-task")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "no-such-task" in lines[0] and "sentiment" in lines[0]
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_evaluate_failing_model_exits_1_with_a_code(run: Run, tmp_path: Path) -> None:
    model = tmp_path / "dies.py"
    model.write_text("import sys\nprint('cannot load weights', flush=True)\nsys.exit(3)\n")
    done = run("evaluate", str(model), "--task", "sentiment", "--json", timeout=120)
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "failed"
    assert result["failure"]["code"] in ("crashed", "never_healthy")
    assert "cannot load weights" in result["failure"]["log_tail"]


# -- dynascore -------------------------------------------------------------------------------
TABLE = """model,performance,throughput,memory,robustness,fairness
big,90,100,1.5,90,90
small,60,100,0.1,90,90
mid,75,150,0.8,85,95
"""


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "table.csv"
    path.write_text(TABLE)
    return path


def _scores(run: Run, *args: str) -> dict:
    done = run("dynascore", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_dynascore_json(run: Run, table: Path) -> None:
    board = _scores(run, str(table), "--json")
    assert {m["model"] for m in board["models"]} == {"big", "small", "mid"}
    assert sorted(m["rank"] for m in board["models"]) == [1, 2, 3]
    assert all(isinstance(m["dynascore"], float) for m in board["models"])
    assert board["weights"]["performance"] == 4.0 and board["instance_memory_gib"] == 32
    assert board["amrs"]["performance"] == 1.0


def test_dynascore_weights_change_the_ranking(run: Run, table: Path) -> None:
    def first(*args: str) -> str:
        board = _scores(run, str(table), "--json", *args)
        return min(board["models"], key=lambda m: m["rank"])["model"]

    assert (
        first("--weights", "performance:1,throughput:0,memory:0,robustness:0,fairness:0") == "big"
    )
    assert (
        first("--weights", "performance:0,throughput:0,memory:1,robustness:0,fairness:0") == "small"
    )
    weighted = _scores(run, str(table), "--json", "--weights", "performance:4,memory:0")
    assert weighted["weights"]["memory"] == 0.0 and weighted["weights"]["throughput"] == 1.0


def test_dynascore_instance_memory(run: Run, table: Path) -> None:
    board = _scores(run, str(table), "--json", "--instance-memory", "64")
    assert board["instance_memory_gib"] == 64.0


def test_dynascore_plain_table(run: Run, table: Path) -> None:
    done = run("dynascore", str(table))
    assert done.returncode == 0 and "dynascore" in done.stdout and "small" in done.stdout


@pytest.mark.parametrize(
    ("content", "args", "needle"),
    [
        ("model,performance,throughput,memory,robustness\na,1,2,3,4\n", [], "fairness"),
        (TABLE, ["--weights", "speed:1"], "speed"),
        (TABLE, ["--weights", "performance:-1"], "performance"),
        (TABLE, ["--instance-memory", "0"], "instance"),
        (TABLE, ["--instance-memory", "-5"], "instance"),
        (TABLE.replace("90,100,1.5", "90,fast,1.5"), [], ""),
        (TABLE + "big,1,1,1,1,1\n", [], "unique"),
        ("", [], ""),
    ],
)
def test_dynascore_bad_input_exits_2_with_one_line(
    run: Run, tmp_path: Path, content: str, args: list[str], needle: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    done = run("dynascore", str(path), *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynaeval dynascore:"), done.stderr
    assert needle in lines[0]


def test_dynascore_missing_file_exits_2(run: Run, tmp_path: Path) -> None:
    done = run("dynascore", str(tmp_path / "absent.csv"))
    assert done.returncode == 2 and "Traceback" not in done.stderr


# -- submit, worker --burst, status, leaderboard (local database) ----------------------------
def test_submit_then_worker_burst_drains_the_queue(
    run: Run, run_process: Run, tmp_path: Path
) -> None:
    tarball = tmp_path / "model.tar"
    tarball.write_bytes(image_tar())  # a valid layout whose layers no engine can load
    ids = []
    for name in ("one", "two"):
        done = run("submit", str(tarball), "--task", "sentiment", "--name", name, "--json")
        assert done.returncode == 0, done.stderr
        created = json.loads(done.stdout)
        assert created["status"] == "queued"
        ids.append(created["id"])
    burst = run_process("worker", "--burst", timeout=240)
    assert burst.returncode == 0, burst.stderr
    assert "done" in burst.stdout and "failed" in burst.stdout
    for model_id in ids:
        status = run("status", model_id, "--json")
        assert status.returncode == 0, status.stderr
        job = json.loads(status.stdout)["job"]
        # every job was taken exactly once; none is left running or untouched
        assert job["attempts"] == 1, job
        assert job["status"] in ("failed", "queued"), job
        assert job["failure"]["code"] in ("image_not_loadable", "platform_error"), job
        if job["status"] == "failed":
            assert job["failure"]["message"]
    again = run_process("worker", "--burst")
    assert again.returncode == 0 and "0 done" in again.stdout


def test_submit_help_names_the_ci_gate(run: Run) -> None:
    done = run("submit", "--help")
    assert done.returncode == 0, done.stderr
    for option in ("--wait", "--timeout", "--fail-under", "--compare-to", "--json", "--server"):
        assert option in done.stdout
    assert "Exit codes: 0" in done.stdout


def test_submit_unknown_task_exits_3(run: Run) -> None:
    done = run("submit", "registry.local/x:1", "--task", "nope", "--name", "m")
    assert done.returncode == 3 and len(done.stderr.strip().splitlines()) == 1


def test_status_of_an_unknown_submission_exits_2(run: Run) -> None:
    done = run("status", "no-such-id")
    assert done.returncode == 2 and "no-such-id" in done.stderr


def test_local_leaderboard_json_and_bad_weights(run: Run) -> None:
    done = run("leaderboard", "sentiment", "--json")
    assert done.returncode == 0, done.stderr
    board = json.loads(done.stdout)
    assert board["task"] == "sentiment" and board["models"] == []
    bad = run("leaderboard", "sentiment", "--weights", "speed:1")
    assert bad.returncode == 2 and "speed" in bad.stderr
