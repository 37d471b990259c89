"""Seeded 95% percentile-bootstrap machinery for task metrics (which metric uses which
resampler is the metric's own business: ``metrics.metric``).

Resamples are drawn as an index matrix (replicates x examples) from
``numpy.random.default_rng(seed)`` and scored with array operations; the matrix is built
in blocks of replicates only to bound memory on large test sets. Accuracy, exact match
and SQuAD F1 are means of per-example scores. Macro-F1 counts, per replicate and label,
gold occurrences, predictions and true positives with one ``bincount`` each, then averages
F1 over the labels present in that replicate (see ``metrics.classification``); a replicate
in which no label of the label set occurs scores 0.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from metrics._checks import check_pair

_BLOCK_ELEMENTS = 4_000_000  # index-matrix entries generated at once


@dataclass(frozen=True)
class Interval:
    """A bootstrap confidence interval."""

    low: float
    high: float
    confidence: float
    n_resamples: int

    def to_dict(self) -> dict[str, float | int]:
        """JSON-ready mapping."""
        return asdict(self)


def _check_sample(n: int, n_resamples: int) -> None:
    if n == 0:
        raise ValueError("cannot bootstrap an empty set of examples.")
    if n_resamples < 1:
        raise ValueError("n_resamples must be at least 1.")


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1.")


def check_options(n: int, n_resamples: int, confidence: float) -> None:
    _check_sample(n, n_resamples)
    _check_confidence(confidence)


def _mean_replicates(values: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """The mean of per-example ``values`` on each seeded resample."""
    blocks = [values[idx].mean(axis=1) for idx in _index_blocks(values.size, n_resamples, seed)]
    return np.concatenate(blocks)


def _index_blocks(n: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Yield (block x n) resample index matrices, n_resamples rows in total."""
    rng = np.random.default_rng(seed)
    block = max(1, _BLOCK_ELEMENTS // n)
    for start in range(0, n_resamples, block):
        rows = min(block, n_resamples - start)
        yield rng.integers(0, n, size=(rows, n))


def _interval(stats: np.ndarray, confidence: float) -> Interval:
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(stats, [tail, 100.0 - tail])
    return Interval(float(low), float(high), confidence, len(stats))


def bootstrap_mean_interval(
    values: np.ndarray, *, n_resamples: int = 1000, seed: int = 0, confidence: float = 0.95
) -> Interval:
    """Percentile-bootstrap interval of the mean of per-example ``values`` (same scale)."""
    values = np.asarray(values, dtype=float)
    check_options(values.size, n_resamples, confidence)
    if not np.all(np.isfinite(values)):
        raise ValueError("per-example values must be finite numbers.")
    return _interval(_mean_replicates(values, n_resamples, seed), confidence)


def _encode(
    gold: Sequence[str], pred: Sequence[str], labels: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Integer codes: label-set members first, any other value after them."""
    vocab = {label: i for i, label in enumerate(dict.fromkeys(labels))}
    n_labels = len(vocab)
    for value in [*gold, *pred]:
        vocab.setdefault(value, len(vocab))
    gold_codes = np.fromiter((vocab[g] for g in gold), dtype=np.int64, count=len(gold))
    pred_codes = np.fromiter((vocab[p] for p in pred), dtype=np.int64, count=len(pred))
    return gold_codes, pred_codes, n_labels, len(vocab)


def macro_f1_replicates(
    gold_codes: np.ndarray, pred_codes: np.ndarray, idx: np.ndarray, n_labels: int, n_codes: int
) -> np.ndarray:
    """Macro-F1 (0..100) of each row of the resample index matrix ``idx``."""
    rows = idx.shape[0]
    offset = (np.arange(rows, dtype=np.int64) * n_codes)[:, None]
    g = gold_codes[idx] + offset
    p = pred_codes[idx] + offset
    size = rows * n_codes
    gold_count = np.bincount(g.ravel(), minlength=size).reshape(rows, n_codes)
    pred_count = np.bincount(p.ravel(), minlength=size).reshape(rows, n_codes)
    true_pos = np.bincount(g[g == p], minlength=size).reshape(rows, n_codes)
    support = (gold_count + pred_count)[:, :n_labels]
    present = support > 0
    f1 = np.divide(
        2.0 * true_pos[:, :n_labels], support, out=np.zeros(support.shape), where=present
    )
    n_present = present.sum(axis=1)
    scores: np.ndarray = np.divide(
        100.0 * f1.sum(axis=1), n_present, out=np.zeros(rows), where=n_present > 0
    )
    return scores


def mean_replicates(values: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """The mean of per-example ``values`` (0..100) on each of ``n_resamples`` seeded resamples."""
    values = np.asarray(values, dtype=float)
    _check_sample(values.size, n_resamples)
    return _mean_replicates(values, n_resamples, seed)


def macro_f1_bootstrap(
    gold: Sequence[str], pred: Sequence[str], labels: Sequence[str], n_resamples: int, seed: int
) -> np.ndarray:
    """Macro-F1 (0..100) on each of ``n_resamples`` seeded resamples of the examples."""
    n = check_pair(gold, pred)
    _check_sample(n, n_resamples)
    gold_codes, pred_codes, n_labels, n_codes = _encode(gold, pred, labels)
    return np.concatenate(
        [
            macro_f1_replicates(gold_codes, pred_codes, idx, n_labels, n_codes)
            for idx in _index_blocks(n, n_resamples, seed)
        ]
    )


def resample_indices(n: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """The seeded (block x n) index matrices every replicate function draws from: metrics
    that are not a mean of per-example values (corpus BLEU, chrF) resample with these."""
    _check_sample(n, n_resamples)
    return _index_blocks(n, n_resamples, seed)


def interval_of(replicates: np.ndarray, confidence: float = 0.95) -> Interval:
    """Percentile interval of precomputed bootstrap replicates."""
    _check_confidence(confidence)
    return _interval(np.asarray(replicates, dtype=float), confidence)
