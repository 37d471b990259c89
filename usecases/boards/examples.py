"""A few of a model's predictions on its task's public sets, for its page.

Only sets a task marks ``public`` (published data: a dev set, or rows that ship with
Dynaeval) are ever shown; a held-out set's text never reaches a page. The predictions are
the model's newest stored run (``worker.predictions``), matched to the set by uid and
shown only when they were made on this very version of the set (its hash).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from configs.schema import TaskSpec
from configs.vocabulary.examples import Example
from evaluator.inputs.datasets import DatasetError, load_examples
from evaluator.inputs.perturbed_sets import dataset_hash
from metrics.outputs import get_output_type
from usecases.service import Service
from worker.predictions import stored_sets

PER_SET = 3


@dataclass(frozen=True)
class ShownField:
    """One input field as the page draws it: text, or an image (base64)."""

    name: str
    kind: str
    value: str


@dataclass(frozen=True)
class ShownExample:
    """A public example: its inputs, its gold references and the model's answer."""

    uid: str
    inputs: tuple[ShownField, ...]
    gold: tuple[str, ...]
    prediction: str


@dataclass(frozen=True)
class ShownSet:
    round: str
    dataset: str
    examples: tuple[ShownExample, ...]


def example_predictions(
    service: Service, task: TaskSpec, model_id: str, per_set: int = PER_SET
) -> list[ShownSet]:
    """Up to ``per_set`` examples of each public set with the model's predictions."""
    stored = stored_sets(service.blobs, model_id)
    shown = []
    for round_spec in task.rounds:
        for dataset in round_spec.datasets:
            kept = stored.get((round_spec.name, dataset.name))
            if not dataset.public or kept is None:
                continue
            try:
                examples = load_examples(task, dataset, service.config_dir)
            except (DatasetError, OSError):
                continue
            if dataset_hash(examples) != kept.dataset_hash:
                continue  # predicted on another version of the set
            answers = dict(zip(kept.uids, kept.outputs, strict=True))
            rows = [_shown(task, e, answers[e.uid]) for e in examples if e.uid in answers]
            if rows:
                shown.append(ShownSet(round_spec.name, dataset.name, tuple(rows[:per_set])))
    return shown


def _shown(task: TaskSpec, example: Example, prediction: str) -> ShownExample:
    fields = tuple(
        ShownField(name, task.field_kind(name), example.inputs[name]) for name in task.input_fields
    )
    several = get_output_type(task.output_type).several_references
    gold = (example.target, *example.references) if several else (example.target,)
    return ShownExample(example.uid, fields, _counted(gold), prediction)


def _counted(references: tuple[str, ...]) -> tuple[str, ...]:
    """Repeated references once each, with their count ('orange ×9'), in first order."""
    counts = Counter(references)
    return tuple(f"{ref} ×{counts[ref]}" if counts[ref] > 1 else ref for ref in counts)
