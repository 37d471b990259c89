"""The adversary's search on its own (evaluator.adversary): bounded in queries, counted by the
models themselves; deterministic for a seed; close to its sources; a QA answer span kept;
resumable from any checkpoint with the same outcome; failing models dropped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from configs.paths import CONFIG_DIR
from configs.schema import TaskSpec
from configs.vocabulary.examples import Example, Prediction
from configs.vocabulary.jobs import AdversaryCheckpoint
from evaluator.adversary import (
    FIRST_SOURCE,
    AdversarySettings,
    Proposal,
    adversary_search,
    candidates,
    within_budget,
)
from evaluator.inputs.datasets import load_examples
from evaluator.tasks import load_tasks


@pytest.fixture(scope="module")
def tasks() -> dict[str, TaskSpec]:
    return load_tasks(CONFIG_DIR / "tasks")


def examples(task: TaskSpec, count: int) -> list[Example]:
    return list(load_examples(task, task.rounds[0].datasets[0], CONFIG_DIR))[:count]


class Lookup:
    """A model right on the texts it has seen verbatim (a label task's gold, or the QA
    answer), wrong on anything else; counts every query it gets."""

    def __init__(self, task: TaskSpec, seen: list[Example]) -> None:
        self.task = task
        self.gold = {tuple(sorted(e.inputs.items())): e.target for e in seen}
        self.queries = 0

    def __call__(self, model_id: str, inputs: Mapping[str, str]) -> Prediction:
        self.queries += 1
        gold = self.gold.get(tuple(sorted(inputs.items())))
        wrong = "" if self.task.output_type == "answer" else "neutral"
        return Prediction("x", gold if gold is not None else wrong)


def run(
    task: TaskSpec, sources: list[Example], spec: AdversarySettings, **kw: Any
) -> tuple[Any, Lookup]:
    model = Lookup(task, sources)
    return adversary_search(task, sources, ["a", "b"], model, spec, **kw), model


def test_the_budget_is_never_exceeded_and_counted_by_the_models(tasks: dict) -> None:
    task = tasks["sentiment"]
    sources = examples(task, 30)
    for budget in (1, 2, 5, 13, 40):
        report, model = run(
            task, sources, AdversarySettings(seed=1, max_queries=budget, max_proposals=99)
        )
        assert model.queries == report.queries_used <= budget
        assert report.stopped_because == "budget"
    report, model = run(
        task, sources, AdversarySettings(seed=1, max_queries=10_000, max_proposals=3)
    )
    assert report.stopped_because == "proposals" and len(report.proposals) == 3


def test_the_same_seed_gives_the_same_proposals(tasks: dict) -> None:
    task = tasks["sentiment"]
    sources = examples(task, 20)
    spec = AdversarySettings(seed=5, max_queries=120, max_proposals=8)
    first, _ = run(task, sources, spec)
    again, _ = run(task, list(reversed(sources)), spec)  # the input order does not matter
    assert first.proposals and first.proposals == again.proposals
    other, _ = run(task, sources, AdversarySettings(seed=6, max_queries=120, max_proposals=8))
    assert [p.source_uid for p in other.proposals] != [p.source_uid for p in first.proposals]


def test_proposals_stay_within_the_edit_budget_and_fool_only_right_models(tasks: dict) -> None:
    task = tasks["sentiment"]
    sources = examples(task, 20)
    by_uid = {e.uid: e for e in sources}
    for budget in (1, 2):
        report, _ = run(
            task, sources, AdversarySettings(seed=2, edit_budget=budget, max_queries=200)
        )
        assert report.proposals
        for proposal in report.proposals:
            source = by_uid[proposal.source_uid]
            assert 0 < proposal.edits <= budget
            assert proposal.inputs != dict(source.inputs)
            assert proposal.intended == {"label": source.target}
            assert proposal.fooled_models == ("a", "b")
            assert set(proposal.answers.values()) == {"neutral"}


def test_a_qa_answer_span_survives(tasks: dict) -> None:
    task = tasks["qa"]
    sources = examples(task, 10)
    report, _ = run(task, sources, AdversarySettings(seed=0, max_queries=200, max_proposals=5))
    assert report.proposals
    for proposal in report.proposals:
        start, answer = proposal.intended["answer_start"], proposal.intended["answer"]
        assert proposal.inputs["context"][start : start + len(answer)] == answer
    for source in sources:
        for candidate in candidates(task, source, AdversarySettings(seed=3, edit_budget=2)):
            start = candidate.example.answer_start
            assert start is not None
            assert candidate.example.inputs["context"][start:].startswith(source.target)


def test_resuming_from_any_checkpoint_ends_like_an_uninterrupted_run(tasks: dict) -> None:
    task = tasks["sentiment"]
    sources = examples(task, 20)
    spec = AdversarySettings(seed=4, max_queries=90, max_proposals=50)
    checkpoints: list[tuple[AdversaryCheckpoint, list[Proposal]]] = []
    whole, _ = run(task, sources, spec, on_source_done=lambda c, f: checkpoints.append((c, f)))
    assert len(checkpoints) > 3
    for index in (0, 2, len(checkpoints) // 2):
        at, _ = checkpoints[index]
        before = [p for _, found in checkpoints[: index + 1] for p in found]
        rest, _ = run(
            task, sources, spec, start=AdversaryCheckpoint.of(at.to_dict()) or FIRST_SOURCE
        )
        assert tuple(before) + rest.proposals == whole.proposals
        assert rest.checkpoint == whole.checkpoint


def test_a_failing_model_is_dropped_and_its_queries_count(tasks: dict) -> None:
    task = tasks["sentiment"]
    sources = examples(task, 10)
    model = Lookup(task, sources)
    calls: list[str] = []

    def query(model_id: str, inputs: Mapping[str, str]) -> Prediction:
        calls.append(model_id)
        if model_id == "b":
            raise ConnectionError("the model exited with code 1")
        return model(model_id, inputs)

    report = adversary_search(task, sources, ["a", "b"], query, AdversarySettings(max_queries=60))
    assert calls.count("b") == 1 and "ConnectionError" in report.failed_models["b"]
    assert report.queries_used == len(calls) <= 60
    assert all(p.fooled_models == ("a",) for p in report.proposals)


def test_within_budget_cuts_to_the_first_edits() -> None:
    original = Example("u", {"statement": "one two three four five"}, "positive")
    perturbed = Example("u", {"statement": "uno two tres four cinco"}, "positive")
    cut = within_budget(original, perturbed, 2)
    assert cut is not None and cut[1] == 2
    assert cut[0].inputs["statement"] == "uno two tres four five"
    assert within_budget(original, original, 3) is None


@pytest.mark.parametrize(
    "bad",
    [{"max_queries": 0}, {"edit_budget": -1}, {"seed": -2}, {"qa_f1_threshold": 0.0},
     {"operators": (), "name_swaps": False}],
)  # fmt: skip
def test_bad_settings_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        AdversarySettings(**bad)
    with pytest.raises(ValueError, match="unknown"):
        AdversarySettings.from_dict({"nonsense": 1})
    assert AdversarySettings.from_dict(AdversarySettings(seed=9).to_dict()) == AdversarySettings(
        seed=9
    )
