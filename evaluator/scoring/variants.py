"""Turn predictions into keyed Scores: performance, agreement per perturbation, slices.

Pure computation over examples and predictions (no I/O); the pipeline feeds it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import cast

import numpy as np

from configs.schema import TaskSpec
from configs.vocabulary.examples import Example, Prediction
from configs.vocabulary.results import Score, ScoreKey, SliceRow
from metrics.bootstrap import interval_of
from metrics.metric import get_metric
from metrics.outputs import Gold, agreement, get_output_type
from metrics.slices import SliceReport, slice_report

AGREEMENT = "agreement"


@dataclass(frozen=True)
class VariantRun:
    """Predictions on one perturbed set: which perturbation, and the changed examples."""

    axis: str  # "robustness" or "fairness"
    name: str
    version: str
    seed: int
    total: int
    examples: tuple[Example, ...]
    predictions: tuple[Prediction, ...]


def outputs(predictions: Sequence[Prediction]) -> list[str]:
    return [p.output for p in predictions]


def bootstrap_seed(seed: int, key: ScoreKey) -> int:
    """A seed per scored set: every round and variant is resampled independently (equal-sized
    rounds would otherwise draw the very same index matrix), reproducibly."""
    text = f"{seed}\x1f{key.round}\x1f{key.dataset}\x1f{key.variant}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def performance_score(
    task: TaskSpec, key: ScoreKey, examples: Sequence[Example], predictions: Sequence[Prediction]
) -> Score:
    """The task metric against gold labels, with a seeded bootstrap interval."""
    return performance_with_replicates(task, key, examples, predictions)[0]


def performance_with_replicates(
    task: TaskSpec, key: ScoreKey, examples: Sequence[Example], predictions: Sequence[Prediction]
) -> tuple[Score, np.ndarray]:
    """The performance Score and its bootstrap replicates (for intervals of aggregates)."""
    gold = gold_of(task, examples)
    pred = outputs(predictions)
    metric = get_metric(task.metric)
    value = metric.score(gold, pred, task.labels)
    replicates = metric.replicates(
        gold,
        pred,
        task.labels,
        n_resamples=task.bootstrap.n_resamples,
        seed=bootstrap_seed(task.bootstrap.seed, key),
    )
    interval = interval_of(replicates)
    score = Score(
        replace(key, metric=task.metric), value, len(examples), interval.low, interval.high
    )
    return score, replicates


def secondary_scores(
    task: TaskSpec, key: ScoreKey, examples: Sequence[Example], predictions: Sequence[Prediction]
) -> list[Score]:
    """The metrics the task's output type reports beside the task's own (QA: exact match
    beside F1 and F1 beside exact match, without intervals; translation: BLEU beside
    chrF++, with seeded intervals like the task's own metric)."""
    return secondary_with_replicates(task, key, examples, predictions)[0]


def secondary_with_replicates(
    task: TaskSpec, key: ScoreKey, examples: Sequence[Example], predictions: Sequence[Prediction]
) -> tuple[list[Score], dict[str, np.ndarray]]:
    """The secondary Scores and, where the type gives them intervals, each metric's
    bootstrap replicates (for the interval of its round-weighted aggregate)."""
    output = get_output_type(task.output_type)
    gold = gold_of(task, examples)
    pred = outputs(predictions)
    scores = []
    replicates: dict[str, np.ndarray] = {}
    for other in output.secondary_metrics(task.metric):
        metric = get_metric(other)
        score = Score(replace(key, metric=other), metric.score(gold, pred, ()), len(examples))
        if output.secondary_intervals and examples:
            seed = bootstrap_seed(task.bootstrap.seed, key)
            reps = metric.replicates(
                gold, pred, (), n_resamples=task.bootstrap.n_resamples, seed=seed
            )
            interval = interval_of(reps)
            score = replace(score, ci_low=interval.low, ci_high=interval.high)
            replicates[other] = reps
        scores.append(score)
    return scores, replicates


def gold_of(task: TaskSpec, examples: Sequence[Example]) -> list[object]:
    """Each example's gold as the task's metrics take it (a label, an answer, or every
    reference translation)."""
    output = get_output_type(task.output_type)
    return [output.gold_for_scoring(Gold(e.target, e.references, e.answer_start)) for e in examples]


def variant_scores(
    task: TaskSpec,
    base: ScoreKey,
    original: Mapping[str, Prediction],
    run: VariantRun,
) -> list[Score]:
    """Agreement with the model's own original predictions (only changed examples count),
    and performance on the perturbed examples against gold."""
    key = replace(base, variant=run.name, variant_version=run.version, seed=run.seed)
    own = [original[e.uid].output for e in run.examples]
    value = agreement(task.output_type, own, outputs(run.predictions))
    scores = [Score(replace(key, metric=AGREEMENT), value, len(run.examples))]
    if run.examples:
        scores.append(performance_score(task, key, run.examples, run.predictions))
    return scores


def pooled_agreement(
    task: TaskSpec, original: Mapping[str, Prediction], runs: Sequence[VariantRun]
) -> tuple[float | None, int]:
    """Agreement over every changed example of every run given (typo + paraphrase pooled)."""
    own: list[str] = []
    perturbed: list[str] = []
    for run in runs:
        own.extend(original[e.uid].output for e in run.examples)
        perturbed.extend(outputs(run.predictions))
    return agreement(task.output_type, own, perturbed), len(own)


def slice_scores(
    task: TaskSpec, base: ScoreKey, examples: Sequence[Example], predictions: Sequence[Prediction]
) -> tuple[list[Score], list[SliceRow]]:
    """Per-group performance for every slice column, plus fairlearn's gap summaries."""
    scores: list[Score] = []
    reports: list[SliceRow] = []
    gold = gold_of(task, examples)
    pred = outputs(predictions)
    for column in task.slices:
        groups = [e.slices[column] for e in examples]
        report = slice_report(
            column, groups, gold, pred, task.metric, task.labels, task.min_slice_size
        )
        reports.append(_slice_row(base, report))
        for group, value in report.by_group.items():
            key = replace(base, slice=f"{column}={group}", metric=task.metric)
            scores.append(Score(key, value, report.sizes[group]))
    return scores, reports


def _slice_row(base: ScoreKey, report: SliceReport) -> SliceRow:
    """A slice report as a result stores it, under the set it was computed on (the keys are
    SliceRow's: tests/unit/test_typed_rows.py holds them)."""
    return cast(SliceRow, {"round": base.round, "dataset": base.dataset, **report.to_dict()})
