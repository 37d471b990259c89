"""One registry of task metrics: a short name maps to a :class:`Metric`, which carries all
the code knows about it: the output type it scores, its direction, its score and how its
bootstrap replicates are drawn.

Every metric scores ``(gold, pred, labels)`` on Dynaboard's 0-100 scale; QA and translation
metrics ignore ``labels``. Task configs name metrics by these short names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from configs.vocabulary.registry import Registry
from metrics._checks import check_pair
from metrics.bootstrap import (
    Interval,
    check_options,
    interval_of,
    macro_f1_bootstrap,
    mean_replicates,
)
from metrics.classification import accuracy, macro_f1
from metrics.qa import exact_match, per_example, qa_exact_match, qa_f1, token_f1
from metrics.translation import (
    bleu_metric,
    chrf_metric,
    corpus_replicates,
    corpus_score,
    spbleu_metric,
)
from metrics.vqa import per_example_vqa, vqa_accuracy

ScoreFn = Callable[[Sequence[Any], Sequence[str], Sequence[str]], float]
# (gold, pred, labels, n_resamples, seed) -> one 0..100 value per resample
ReplicatesFn = Callable[[Sequence[Any], Sequence[str], Sequence[str], int, int], np.ndarray]


@dataclass(frozen=True)
class Metric:
    """A named task metric; ``score(gold, pred, labels)`` returns 0..100."""

    name: str
    output_type: str  # the task output type it scores (metrics.outputs)
    higher_is_better: bool
    score: ScoreFn
    replicates_fn: ReplicatesFn

    def replicates(
        self,
        gold: Sequence[Any],
        pred: Sequence[str],
        labels: Sequence[str],
        *,
        n_resamples: int = 1000,
        seed: int = 0,
    ) -> np.ndarray:
        """The metric on each of ``n_resamples`` seeded resamples; replicates of several sets
        combine into an interval of an aggregate replicate by replicate."""
        return self.replicates_fn(gold, pred, labels, n_resamples, seed)

    def interval(
        self,
        gold: Sequence[Any],
        pred: Sequence[str],
        labels: Sequence[str],
        *,
        n_resamples: int = 1000,
        seed: int = 0,
        confidence: float = 0.95,
    ) -> Interval:
        """Percentile-bootstrap interval (0..100 scale)."""
        check_options(len(gold), n_resamples, confidence)
        replicates = self.replicates(gold, pred, labels, n_resamples=n_resamples, seed=seed)
        return interval_of(replicates, confidence)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready description (the functions are omitted)."""
        return {"name": self.name, "higher_is_better": self.higher_is_better}


def _mean_of(per_example_fn: Callable[[Sequence[Any], Sequence[str]], np.ndarray]) -> ReplicatesFn:
    """Replicates of a metric that is the mean of per-example 0..1 values."""

    def replicates(
        gold: Sequence[Any], pred: Sequence[str], labels: Sequence[str], n: int, seed: int
    ) -> np.ndarray:
        return mean_replicates(100.0 * per_example_fn(gold, pred).astype(float), n, seed)

    return replicates


def _hits(gold: Sequence[str], pred: Sequence[str]) -> np.ndarray:
    check_pair(gold, pred)
    hits: np.ndarray = np.asarray(gold, dtype=object) == np.asarray(pred, dtype=object)
    return hits


REGISTRY: Registry[Metric] = Registry("metric")
for _metric in (
    Metric(
        "accuracy", "label", True, lambda gold, pred, labels: accuracy(gold, pred), _mean_of(_hits)
    ),
    Metric("macro_f1", "label", True, macro_f1, macro_f1_bootstrap),
    Metric(
        "squad_f1",
        "answer",
        True,
        lambda gold, pred, labels: qa_f1(gold, pred),
        _mean_of(lambda gold, pred: per_example(token_f1, gold, pred)),
    ),
    Metric(
        "exact_match",
        "answer",
        True,
        lambda gold, pred, labels: qa_exact_match(gold, pred),
        _mean_of(lambda gold, pred: per_example(exact_match, gold, pred)),
    ),
    Metric(
        "bleu",
        "translation",
        True,
        lambda gold, pred, labels: corpus_score(bleu_metric, gold, pred),
        lambda gold, pred, labels, n, seed: corpus_replicates(bleu_metric, gold, pred, n, seed),
    ),
    Metric(
        "spbleu",  # BLEU on SentencePiece pieces; needs an operator's model file
        "translation",
        True,
        lambda gold, pred, labels: corpus_score(spbleu_metric, gold, pred),
        lambda gold, pred, labels, n, seed: corpus_replicates(spbleu_metric, gold, pred, n, seed),
    ),
    Metric(
        "chrf",  # chrF++
        "translation",
        True,
        lambda gold, pred, labels: corpus_score(chrf_metric, gold, pred),
        lambda gold, pred, labels, n, seed: corpus_replicates(chrf_metric, gold, pred, n, seed),
    ),
    Metric(
        "vqa_accuracy",
        "vqa",
        True,
        lambda gold, pred, labels: vqa_accuracy(gold, pred),
        _mean_of(per_example_vqa),
    ),
):
    REGISTRY.add(_metric.name, _metric)


def get_metric(name: str) -> Metric:
    """The registered metric called ``name`` (:class:`UnknownName` with a suggestion)."""
    return REGISTRY.get(name)


def metric_names() -> tuple[str, ...]:
    """Names of all registered metrics, sorted."""
    return REGISTRY.names()
