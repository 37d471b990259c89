"""The whole pipeline on the two-round ``toy`` task with a deterministic rule model.

The rule model answers "yes" when the claim holds the word "she", else "no", so every number
can be worked out by hand from tests/fixtures/configs/datasets/toy:
* alpha: 15 of 20 right (75.0); the gender swap changes all 20 examples (premise and claim
  alike), 10 of them in the claim; 14 keep their answer (70.0)
* r12:   12 of 20 right (60.0); the swap changes 20 examples, 5 in the claim; 19 keep their
  answer (95.0)
* rounds weigh 1 (alpha) and 3 (r12): performance 63.75, fairness 88.75.
The model sees opaque wire ids, never dataset uids; a failing model's log tail comes back
with every line quoting held-out input withheld.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from configs.schema import TaskSpec
from configs.vocabulary.examples import Example
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.results import EvaluationResult
from evaluator.inputs.datasets import load_examples
from evaluator.inputs.perturbed_sets import dataset_hash
from evaluator.inputs.redaction import WITHHELD, HeldOutText
from evaluator.pipeline import run_evaluation
from evaluator.runtimes.process import ProcessRuntime
from evaluator.runtimes.runtime import ExitReason
from evaluator.tasks import load_tasks
from evaluator.transport.client import ModelClient
from store.blobs import LocalBlobStore
from tests.conftest import V1_SERVER, make_config_dir, server_command, with_limits

ROUNDS = ["alpha", "r12"]
WIRE_ID = re.compile(r"[0-9a-f]{20}")


def rule(claim: str) -> str:
    return "yes" if "she" in re.findall(r"[a-z]+", claim.lower()) else "no"


@dataclass
class Run:
    task: TaskSpec
    config_dir: Path
    result: EvaluationResult
    record: Path
    predictions: Path
    progress: list[tuple[float, str]]


def evaluate(root: Path, config_dir: Path, task: TaskSpec, mode: str = "rule") -> Run:
    record, predictions = root / "requests.jsonl", root / "predictions"
    progress: list[tuple[float, str]] = []
    runtime = ProcessRuntime(server_command(V1_SERVER, mode, "--record", str(record)))
    result = run_evaluation(
        task,
        runtime,
        LocalBlobStore(root / "blobs"),
        config_dir=config_dir,
        progress=lambda fraction, stage: progress.append((fraction, stage)),
        save_predictions=predictions,
    )
    return Run(task, config_dir, result, record, predictions, progress)


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = tmp_path_factory.mktemp("toy-run")
    config_dir = make_config_dir(root / "configs")
    task = load_tasks(config_dir / "tasks")["toy"]
    run = evaluate(root, config_dir, task)
    assert run.result.status == "done", run.result.failure
    return run


def saved(run: Run, round_name: str, variant: str) -> list[dict[str, Any]]:
    path = run.predictions / round_name / "test" / f"{variant}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- numbers worked out by hand -------------------------------------------------------------
def test_per_round_performance_is_the_hand_computed_accuracy(toy_run: Run) -> None:
    rows = {row["round"]: row for row in toy_run.result.rounds}
    assert list(rows) == ROUNDS
    assert rows["alpha"]["performance"] == pytest.approx(75.0)
    assert rows["r12"]["performance"] == pytest.approx(60.0)
    assert rows["alpha"]["n"] == rows["r12"]["n"] == 20
    summary = toy_run.result.summary
    assert summary["performance"] == pytest.approx((75.0 * 1 + 60.0 * 3) / 4)
    low, high = summary["performance_ci"]
    assert low <= summary["performance"] <= high
    assert toy_run.result.summary["metric"] == "accuracy"


def test_fairness_counts_only_the_examples_the_swap_changed(toy_run: Run) -> None:
    rows = {row["round"]: row for row in toy_run.result.rounds}
    assert rows["alpha"]["fairness"] == pytest.approx(70.0)
    assert rows["alpha"]["fairness_n"] == 20
    assert rows["r12"]["fairness"] == pytest.approx(95.0)
    assert rows["r12"]["fairness_n"] == 20
    assert rows["alpha"]["variants"]["fairness"] == pytest.approx(70.0)
    assert toy_run.result.summary["fairness"] == pytest.approx((70.0 * 1 + 95.0 * 3) / 4)
    counts = {(c["round"], c["variant"]): c for c in toy_run.result.provenance["perturbations"]}
    assert counts[("alpha", "fairness")]["changed"] == 20
    assert counts[("r12", "fairness")]["changed"] == 20
    assert counts[("alpha", "fairness")]["total"] == 20


def test_robustness_is_agreement_on_the_changed_examples(toy_run: Run) -> None:
    rows = {row["round"]: row for row in toy_run.result.rounds}
    counts = {(c["round"], c["variant"]): c for c in toy_run.result.provenance["perturbations"]}
    expected = {}
    for round_name in ROUNDS:
        original = {row["uid"]: row["prediction"] for row in saved(toy_run, round_name, "original")}
        typo = saved(toy_run, round_name, "typo")
        assert (
            len(typo) == counts[(round_name, "typo")]["changed"] == rows[round_name]["robustness_n"]
        )
        assert 0 < len(typo) <= 20
        for row in typo:  # the saved prediction is the rule applied to the perturbed claim
            assert row["prediction"] == rule(row["inputs"]["claim"])
        same = sum(original[row["uid"]] == row["prediction"] for row in typo)
        expected[round_name] = 100.0 * same / len(typo)
        assert rows[round_name]["robustness"] == pytest.approx(expected[round_name])
    summary = toy_run.result.summary["robustness"]
    assert summary == pytest.approx((expected["alpha"] + 3 * expected["r12"]) / 4)


def test_noise_touches_the_perturb_fields_and_swaps_every_field(toy_run: Run) -> None:
    """Typos hit only the claim (perturb_fields); a gender swap renames alike in premise and
    claim, or a renamed person in the claim would no longer be the premise's."""
    for round_name in ROUNDS:
        original = {row["uid"]: row for row in saved(toy_run, round_name, "original")}
        for row in saved(toy_run, round_name, "typo"):
            before = original[row["uid"]]
            assert row["inputs"]["premise"] == before["inputs"]["premise"]
            assert row["inputs"]["claim"] != before["inputs"]["claim"]
            assert row["gold"] == before["gold"]
        swapped = saved(toy_run, round_name, "fairness")
        assert any(
            row["inputs"]["premise"] != original[row["uid"]]["inputs"]["premise"] for row in swapped
        )
        assert all(row["gold"] == original[row["uid"]]["gold"] for row in swapped)


# -- keys, provenance, files ----------------------------------------------------------------
def test_every_score_has_a_full_unique_key(toy_run: Run) -> None:
    hashes = toy_run.result.provenance["dataset_hashes"]
    for round_name in ROUNDS:
        spec = toy_run.task.round(round_name).datasets[0]
        examples = load_examples(toy_run.task, spec, toy_run.config_dir)
        assert hashes[f"{round_name}/test"] == dataset_hash(examples)
    keys = [score.key for score in toy_run.result.scores]
    assert len(set(keys)) == len(keys)
    variants = set()
    for key in keys:
        assert key.task == "toy" and key.round in ROUNDS and key.dataset == "test"
        assert key.dataset_hash == hashes[f"{key.round}/test"]
        assert key.metric and isinstance(key.seed, int)
        variants.add((key.variant, key.variant_version))
        if key.variant in ("typo", "fairness") and key.variant_version:
            assert key.seed == 0
    assert ("original", "") in variants
    assert {"typo", "fairness"} <= {v for v, version in variants if version}
    slices = {key.slice for key in keys if key.slice}
    assert slices == {"group=north", "group=south"}


def test_provenance_records_versions_runtime_and_limits(toy_run: Run) -> None:
    provenance = toy_run.result.provenance
    assert provenance["task_version"] == 1
    assert provenance["runtime"]["kind"] == "process"
    assert provenance["limits"]["request_s"] == 5
    assert provenance["duration_s"] > 0


def test_saved_predictions_carry_the_dataset_uids(toy_run: Run) -> None:
    for round_name in ROUNDS:
        spec = toy_run.task.round(round_name).datasets[0]
        uids = [e.uid for e in load_examples(toy_run.task, spec, toy_run.config_dir)]
        rows = saved(toy_run, round_name, "original")
        assert [row["uid"] for row in rows] == uids
        assert all(row["round"] == round_name and row["variant"] == "original" for row in rows)
        for variant in ("typo", "fairness"):
            assert set(row["uid"] for row in saved(toy_run, round_name, variant)) <= set(uids)
    alpha = [row["uid"] for row in saved(toy_run, "alpha", "original")]
    assert {"007", "alpha/2", "x y", "ünï-5", "1.0", "12"} <= set(alpha)


def dataset_uids(run: Run) -> set[str]:
    return {
        e.uid
        for name in ROUNDS
        for e in load_examples(run.task, run.task.round(name).datasets[0], run.config_dir)
    }


def test_the_model_sees_inputs_only_and_opaque_wire_ids(toy_run: Run) -> None:
    bodies = [json.loads(line) for line in toy_run.record.read_text().splitlines()]
    sent: list[str] = []
    for body in bodies:
        assert body["task"] == "toy"
        assert 0 < len(body["instances"]) <= toy_run.task.batch_size
        for instance in body["instances"]:
            assert set(instance) == {"uid", "premise", "claim"}
            assert WIRE_ID.fullmatch(instance["uid"])
            sent.append(instance["uid"])
    # original, perturbed and profiling passes: never one id twice, never a dataset uid
    assert len(sent) == len(set(sent)) > 2 * 40
    assert not set(sent) & dataset_uids(toy_run)


def test_a_model_caching_answers_by_uid_gains_no_robustness(tmp_path: Path) -> None:
    """The cheat answers from the text, except that a uid it has seen gets its first answer
    again: with dataset uids on the wire it scored 100 robustness and fairness."""
    config_dir = make_config_dir(tmp_path / "configs")
    task = load_tasks(config_dir / "tasks")["toy"]
    run = evaluate(tmp_path, config_dir, task, "uid_cache")
    assert run.result.status == "done", run.result.failure
    assert run.result.summary["robustness"] < 60
    assert run.result.summary["fairness"] < 90


def test_profile_has_positive_throughput_and_memory(toy_run: Run) -> None:
    summary, profile = toy_run.result.summary, toy_run.result.profile
    assert summary["throughput"] > 0 and profile["throughput"]["examples"] >= 16
    assert profile["throughput"]["batches"] >= 3
    assert summary["memory"] > 0 and summary["memory_peak"] >= summary["memory"]
    assert profile["ready_s"] >= 0


def test_progress_goes_forward_and_ends_at_one(toy_run: Run) -> None:
    fractions = [fraction for fraction, _ in toy_run.progress]
    assert fractions == sorted(fractions)
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    assert any("round r12" in stage for _, stage in toy_run.progress)


def test_the_result_is_json_ready(toy_run: Run) -> None:
    data = json.loads(json.dumps(toy_run.result.to_dict(), allow_nan=False))
    assert data["status"] == "done" and data["failure"] is None
    assert len(data["scores"]) == len(toy_run.result.scores)


# -- determinism and budgets ----------------------------------------------------------------
def test_evaluating_twice_gives_identical_scores(toy_run: Run, tmp_path: Path) -> None:
    config_dir = make_config_dir(tmp_path / "configs")
    again = evaluate(tmp_path, config_dir, load_tasks(config_dir / "tasks")["toy"])
    assert again.result.status == "done", again.result.failure
    assert [s.to_dict() for s in again.result.scores] == [
        s.to_dict() for s in toy_run.result.scores
    ]
    assert again.result.rounds == toy_run.result.rounds
    for variant in ("original", "typo", "fairness"):
        assert saved(again, "alpha", variant) == saved(toy_run, "alpha", variant)


def test_a_total_budget_cut_ends_in_total_timeout(
    toy_task: TaskSpec, config_dir: Path, blobs: LocalBlobStore
) -> None:
    """A model that never answers, with a request budget longer than the whole budget."""
    task = with_limits(toy_task, request_s=30, total_s=1.5)
    runtime = ProcessRuntime(server_command(V1_SERVER, "hang"))
    result = run_evaluation(task, runtime, blobs, config_dir=config_dir)
    assert result.failure is not None
    assert result.failure.code == FailureCode.TOTAL_TIMEOUT.value, result.failure
    assert "1.5 s" in result.failure.message
    assert not runtime.alive()


def test_a_platform_fault_is_a_platform_error_not_the_models(
    toy_task: TaskSpec, config_dir: Path, blobs: LocalBlobStore
) -> None:
    (config_dir / "datasets" / "toy" / "r12.jsonl").write_text("not json\n")
    runtime = ProcessRuntime(server_command(V1_SERVER, "rule"))
    result = run_evaluation(toy_task, runtime, blobs, config_dir=config_dir)
    assert result.failure is not None
    assert result.failure.code == FailureCode.PLATFORM_ERROR.value
    assert not result.failure.user_caused
    assert "r12.jsonl:1" in result.failure.message
    assert not runtime.alive()


def test_a_start_failure_is_reported(
    toy_task: TaskSpec, config_dir: Path, blobs: LocalBlobStore, tmp_path: Path
) -> None:
    runtime = ProcessRuntime([str(tmp_path / "no-such-model")])
    result = run_evaluation(toy_task, runtime, blobs, config_dir=config_dir)
    assert result.failure is not None
    assert result.failure.code == FailureCode.START_FAILED.value


def test_a_second_model_reuses_every_perturbed_set(tmp_path: Path) -> None:
    """Perturbed sets are materialised once per dataset and shared: the second model's
    run reads them all from the blob store, and both models saw identical inputs."""
    config_dir = make_config_dir(tmp_path / "configs")
    task = load_tasks(config_dir / "tasks")["toy"]
    first = evaluate(tmp_path / "one", config_dir, task)
    (tmp_path / "two").mkdir()
    second_blobs = tmp_path / "two" / "blobs"
    second_blobs.symlink_to(tmp_path / "one" / "blobs")  # the same store, as in the service
    second = evaluate(tmp_path / "two", config_dir, task)
    counts = [first.result.provenance["perturbations"], second.result.provenance["perturbations"]]
    assert counts[0] and all(not entry["from_cache"] for entry in counts[0])
    assert all(entry["from_cache"] for entry in counts[1])
    assert [e["changed"] for e in counts[0]] == [e["changed"] for e in counts[1]]
    for round_name in ROUNDS:
        for variant in ("typo", "fairness"):
            inputs = [
                [row["inputs"] for row in saved(run, round_name, variant)]
                for run in (first, second)
            ]
            assert inputs[0] == inputs[1]


def test_rounds_report_performance_on_the_perturbed_sets(toy_run: Run) -> None:
    for row in toy_run.result.rounds:
        assert set(row["variant_performance"]) >= {"typo", "fairness"}
        assert all(0 <= value <= 100 for value in row["variant_performance"].values())


# -- hostile models -------------------------------------------------------------------------
def test_a_trickled_reply_is_cut_by_the_total_budget(
    toy_task: TaskSpec, config_dir: Path, blobs: LocalBlobStore
) -> None:
    """Bytes keep coming, so no read ever times out, and the request's own 30 s deadline is
    far away: only the 2 s budget of the whole run (TOTAL_TIMEOUT, not REQUEST_TIMEOUT) can
    end it."""
    task = with_limits(toy_task, request_s=30, total_s=2.0)
    runtime = ProcessRuntime(server_command(V1_SERVER, "trickle_body", "--delay", "0.5"))
    result = run_evaluation(task, runtime, blobs, config_dir=config_dir)
    assert result.failure is not None
    assert result.failure.code == FailureCode.TOTAL_TIMEOUT, result.failure


def test_deeply_nested_json_is_the_models_fault_through_the_pipeline(
    toy_task: TaskSpec, config_dir: Path, blobs: LocalBlobStore
) -> None:
    runtime = ProcessRuntime(server_command(V1_SERVER, "deep_json"))
    result = run_evaluation(toy_task, runtime, blobs, config_dir=config_dir)
    assert result.failure is not None
    assert result.failure.code == FailureCode.BAD_JSON.value, result.failure
    assert result.failure.user_caused


def test_an_error_handling_a_reply_is_not_a_platform_error(
    toy_task: TaskSpec,
    config_dir: Path,
    blobs: LocalBlobStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def explode(*args: object, **kwargs: object) -> None:
        raise KeyError("predictions")

    monkeypatch.setattr(ModelClient, "predict", explode)
    runtime = ProcessRuntime(server_command(V1_SERVER, "rule"))
    result = run_evaluation(toy_task, runtime, blobs, config_dir=config_dir)
    assert result.failure is not None and result.failure.user_caused
    assert result.failure.code == FailureCode.BAD_PREDICTION.value, result.failure


class UnexplainedRuntime(ProcessRuntime):
    """A runtime whose account of a failure is broken: it raises, or names no known code."""

    def __init__(self, command: list[str], reason: tuple[str, str] | None) -> None:
        super().__init__(command)
        self.reason = reason

    def exit_reason(self) -> ExitReason | None:
        if self.reason is None:
            raise RuntimeError("the engine went away")
        return ExitReason(*self.reason)  # type: ignore[arg-type]  # a code we do not know


@pytest.mark.parametrize(
    "reason",
    [None, ("no_such_code", "?"), ("cancelled", "?")],
    ids=["raises", "unknown", "not-an-exit"],
)
def test_a_broken_exit_reason_keeps_the_symptom_seen(
    toy_task: TaskSpec,
    config_dir: Path,
    blobs: LocalBlobStore,
    reason: tuple[str, str] | None,
) -> None:
    command = server_command(V1_SERVER, "die_after", "--after", "1")
    result = run_evaluation(
        toy_task, UnexplainedRuntime(command, reason), blobs, config_dir=config_dir
    )
    assert result.failure is not None and result.failure.user_caused
    assert result.failure.code == FailureCode.CRASHED.value, result.failure
    assert "fatal: dying on predict call 2" in result.failure.log_tail


def test_the_runtimes_account_of_a_platform_kill_replaces_the_symptom(
    toy_task: TaskSpec, config_dir: Path, blobs: LocalBlobStore
) -> None:
    """The engine saw the sandbox killed from outside: the platform's fault (retried, never
    charged), not the ``crashed`` the dropped connection looked like."""
    command = server_command(V1_SERVER, "die_after", "--after", "1")
    killed = ("platform_error", "the model's sandbox was killed from outside")
    result = run_evaluation(
        toy_task, UnexplainedRuntime(command, killed), blobs, config_dir=config_dir
    )
    assert result.failure is not None and not result.failure.user_caused
    assert result.failure.code == FailureCode.PLATFORM_ERROR.value, result.failure
    assert "killed from outside" in result.failure.message


def sent_texts(examples: Sequence[Example]) -> set[str]:
    return {text for example in examples for text in example.inputs.values()}


def test_a_model_printing_its_inputs_gets_a_tail_without_them(
    toy_task: TaskSpec, config_dir: Path, blobs: LocalBlobStore
) -> None:
    runtime = ProcessRuntime(server_command(V1_SERVER, "leak_and_die"))
    result = run_evaluation(toy_task, runtime, blobs, config_dir=config_dir)
    assert result.failure is not None and result.failure.code == FailureCode.CRASHED.value
    tail = result.failure.log_tail
    first = toy_task.rounds[0].datasets[0]
    for text in sent_texts(load_examples(toy_task, first, config_dir)):
        assert text not in tail
    assert tail.count(WITHHELD) >= 3 * toy_task.batch_size  # 1 JSON line + 2 fields each
    assert "Traceback (most recent call last):" in tail
    assert "RuntimeError: the model gave up" in tail
    assert "mode=leak_and_die" in tail


def test_an_error_reply_quoting_inputs_is_withheld_from_the_message(
    toy_task: TaskSpec, config_dir: Path, blobs: LocalBlobStore
) -> None:
    runtime = ProcessRuntime(server_command(V1_SERVER, "echo_500"))
    result = run_evaluation(toy_task, runtime, blobs, config_dir=config_dir)
    assert result.failure is not None and result.failure.code == FailureCode.BAD_STATUS.value
    first = toy_task.rounds[0].datasets[0]
    for text in sent_texts(load_examples(toy_task, first, config_dir)):
        assert text not in result.failure.message
    assert WITHHELD in result.failure.message


def test_redaction_matches_windows_of_long_texts_and_short_texts_whole() -> None:
    long_text = "The committee postponed the vote until the spring session."
    held = HeldOutText()
    held.add([Example("1", {"a": long_text, "b": "tiny claim", "c": " "}, "x")])
    log = "\n".join(
        [
            "booting",
            f"got {long_text[10:34]}!",  # exactly one 24-character window
            f"got {long_text[10:33]}",  # 23 characters: not recognised
            "claim: tiny claim.",
            "tiny",
            "",
            "Traceback (most recent call last):",
        ]
    )
    assert held.redact(log).split("\n") == [
        "booting",
        WITHHELD,
        f"got {long_text[10:33]}",
        WITHHELD,
        "tiny",
        "",
        "Traceback (most recent call last):",
    ]
    assert HeldOutText().redact(log) == log  # nothing sent, nothing to withhold
