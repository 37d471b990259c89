"""Paired bootstrap of the difference between two models scored on the same examples.

A release gate asks whether a candidate is *significantly* worse than a baseline on the
same held-out examples. Resampling each model on its own ignores that both answered the
same questions; the paired bootstrap draws one resample of example indices per replicate
and applies it to both models, so the replicate difference keeps the pairing.

Two entry points, both pure and seeded (``numpy.random.default_rng(seed)``):

* :func:`paired_bootstrap` takes per-example values of both models (correctness 0/1, token
  F1 0..1 or any per-example score) and bootstraps the difference of their means.
* :func:`paired_metric_replicates` draws the shared resamples for a task metric on one set
  (``accuracy``, ``exact_match``, ``squad_f1`` as means of per-example values; ``macro_f1``
  recomputed on every resample; corpus ``bleu`` and ``chrf`` re-summed from sacrebleu's
  per-sentence statistics, sacrebleu's own paired bootstrap), so sets can be combined replicate by replicate like the
  point estimate before :func:`compare_replicates` turns them into a :class:`PairedDifference`.

The difference is ``candidate - baseline``: a drop is significant at the confidence level
when the whole interval lies below 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from metrics._checks import check_pair
from metrics.bootstrap import check_options, macro_f1_replicates
from metrics.qa import exact_match, per_example, token_f1
from metrics.translation import bleu_metric, chrf_metric, scores_of_resamples, sentence_statistics
from metrics.vqa import per_example_vqa


@dataclass(frozen=True)
class PairedDifference:
    """``candidate - baseline`` with its paired-bootstrap interval."""

    candidate: float
    baseline: float
    difference: float
    low: float
    high: float
    confidence: float
    n_resamples: int
    seed: int

    @property
    def significant_drop(self) -> bool:
        """The candidate is worse and the whole interval lies below 0."""
        return self.high < 0.0

    @property
    def significant_gain(self) -> bool:
        """The candidate is better and the whole interval lies above 0."""
        return self.low > 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the two verdicts."""
        return {
            **asdict(self),
            "significant_drop": self.significant_drop,
            "significant_gain": self.significant_gain,
        }


def resample_indices(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """The (n_resamples x n) matrix of example indices both models are scored on."""
    check_options(n, n_resamples, 0.95)
    idx: np.ndarray = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    return idx


def compare_replicates(
    candidate: float,
    baseline: float,
    candidate_replicates: np.ndarray,
    baseline_replicates: np.ndarray,
    *,
    seed: int,
    confidence: float = 0.95,
) -> PairedDifference:
    """The percentile interval of the replicate-by-replicate difference (paired replicates:
    row ``i`` of both arrays comes from the same resample)."""
    cand = np.asarray(candidate_replicates, dtype=float)
    base = np.asarray(baseline_replicates, dtype=float)
    if cand.shape != base.shape or cand.ndim != 1 or cand.size == 0:
        raise ValueError("paired replicates must be two non-empty arrays of the same length.")
    check_options(1, cand.size, confidence)
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(cand - base, [tail, 100.0 - tail])
    return PairedDifference(
        float(candidate),
        float(baseline),
        float(candidate - baseline),
        float(low),
        float(high),
        confidence,
        int(cand.size),
        seed,
    )


def paired_bootstrap(
    candidate: Sequence[float] | np.ndarray,
    baseline: Sequence[float] | np.ndarray,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> PairedDifference:
    """Difference of the means of per-example values (same scale in and out), with the
    interval of the mean difference over shared resamples of the examples."""
    cand = np.asarray(candidate, dtype=float)
    base = np.asarray(baseline, dtype=float)
    check_pair(cand, base)
    if not (np.all(np.isfinite(cand)) and np.all(np.isfinite(base))):
        raise ValueError("per-example values must be finite numbers.")
    idx = resample_indices(cand.size, n_resamples, seed)
    return compare_replicates(
        float(cand.mean()),
        float(base.mean()),
        cand[idx].mean(axis=1),
        base[idx].mean(axis=1),
        seed=seed,
        confidence=confidence,
    )


def _per_example(metric: str, gold: Sequence[Any], pred: Sequence[Any]) -> np.ndarray:
    if metric == "accuracy":
        hits: np.ndarray = np.asarray(gold, dtype=object) == np.asarray(pred, dtype=object)
        return 100.0 * hits.astype(float)
    if metric == "squad_f1":
        return 100.0 * per_example(token_f1, gold, pred)
    if metric == "exact_match":
        return 100.0 * per_example(exact_match, gold, pred)
    if metric == "vqa_accuracy":
        return 100.0 * per_example_vqa(gold, pred)
    raise ValueError(f"no paired bootstrap for metric {metric!r}")


_CORPUS_METRICS: dict[str, Callable[[], Any]] = {"bleu": bleu_metric, "chrf": chrf_metric}
PAIRED_METRICS = (
    "accuracy", "bleu", "chrf", "exact_match", "macro_f1", "squad_f1", "vqa_accuracy",
)  # fmt: skip


def paired_metric_replicates(
    metric: str,
    gold: Sequence[Any],
    candidate: Sequence[Any],
    baseline: Sequence[Any],
    labels: Sequence[str],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float, np.ndarray, np.ndarray]:
    """The task metric (0..100) of both models on one set and on each shared resample:
    ``(candidate, baseline, candidate_replicates, baseline_replicates)``."""
    n = check_pair(gold, candidate)
    check_pair(gold, baseline)
    idx = resample_indices(n, n_resamples, seed)
    if metric == "macro_f1":
        vocab = {label: i for i, label in enumerate(dict.fromkeys(labels))}
        n_labels = len(vocab)
        for value in [*gold, *candidate, *baseline]:
            vocab.setdefault(value, len(vocab))
        codes = [np.array([vocab[v] for v in values], dtype=np.int64) for values in
                 (gold, candidate, baseline)]  # fmt: skip
        full = np.arange(n)[None, :]
        points = [
            float(macro_f1_replicates(codes[0], codes[i], full, n_labels, len(vocab))[0])
            for i in (1, 2)
        ]
        reps = [macro_f1_replicates(codes[0], codes[i], idx, n_labels, len(vocab)) for i in (1, 2)]
        return points[0], points[1], reps[0], reps[1]
    if metric in _CORPUS_METRICS:
        return _corpus_pair(_CORPUS_METRICS[metric], gold, candidate, baseline, idx)
    cand = _per_example(metric, gold, candidate)
    base = _per_example(metric, gold, baseline)
    return float(cand.mean()), float(base.mean()), cand[idx].mean(axis=1), base[idx].mean(axis=1)


def _corpus_pair(
    factory: Callable[[], Any],
    gold: Sequence[Any],
    candidate: Sequence[Any],
    baseline: Sequence[Any],
    idx: np.ndarray,
) -> tuple[float, float, np.ndarray, np.ndarray]:
    """sacrebleu's paired bootstrap for a corpus metric: both systems' per-sentence
    statistics summed over the same resampled sentences (``sacrebleu --paired-bs``'s
    procedure, on the shared index matrix so rounds and sets combine)."""
    metric = factory()
    points, reps = [], []
    for pred in (candidate, baseline):
        stats = sentence_statistics(metric, gold, [str(p) for p in pred])
        points.append(float(scores_of_resamples(metric, stats, np.arange(len(pred))[None, :])[0]))
        reps.append(scores_of_resamples(metric, stats, idx))
    return points[0], points[1], reps[0], reps[1]
