"""Machine-translation metrics, computed by sacrebleu: corpus BLEU (13a tokenisation) and
chrF++ (character 6-grams plus word bigrams), each on the 0-100 scale.

A gold entry is a tuple of references (one or more; segments may have different numbers
of references). Bootstrap replicates resample sentences and re-sum sacrebleu's own
per-sentence sufficient statistics, so every replicate is exactly the corpus score of its
resample, as sacrebleu's ``--confidence`` computes it.

Pure: no I/O. sacrebleu is imported when a translation metric is first used, so label and
QA evaluations do not pay for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from metrics._checks import check_pair
from metrics.bootstrap import resample_indices

if TYPE_CHECKING:
    from sacrebleu.metrics.base import Metric as SacreMetric

References = tuple[str, ...]


def bleu_metric() -> SacreMetric:
    """sacrebleu's BLEU as Dynabench's FLORES task reports it (13a tokenisation)."""
    from sacrebleu.metrics import BLEU

    return BLEU(tokenize="13a")


# The SentencePiece segmenter spBLEU tokenises with (FLORES-200's model, as sacrebleu's
# ``flores200`` tokeniser uses it): None until an operator's setting installs one
# (``evaluator.scoring.spbleu``). A function from a line to its pieces joined by spaces.
_PIECES: list[Callable[[str], str]] = []


class SpBleuUnavailable(RuntimeError):
    """spBLEU was asked for, but no SentencePiece model is installed."""


def use_sentencepiece(pieces: Callable[[str], str] | None) -> None:
    """Install (or, with None, remove) the segmenter spBLEU tokenises with."""
    _PIECES.clear()
    if pieces is not None:
        _PIECES.append(pieces)


def spbleu_available() -> tuple[str, ...]:
    """("spbleu",) when a SentencePiece model is installed, else ()."""
    return ("spbleu",) if _PIECES else ()


def spbleu_metric() -> SacreMetric:
    """spBLEU: sacrebleu's BLEU on SentencePiece pieces, as its ``flores200`` tokeniser
    computes it (" ".join of the pieces), with the installed model."""
    from sacrebleu.metrics import BLEU

    if not _PIECES:
        raise SpBleuUnavailable(
            "spBLEU needs a SentencePiece model: set DYNAEVAL_SPBLEU_MODEL to its file"
        )
    metric = BLEU(tokenize="none")
    metric.tokenizer = _PIECES[0]
    return metric


def chrf_metric() -> SacreMetric:
    """chrF++: sacrebleu's chrF with word bigrams (``word_order=2``)."""
    from sacrebleu.metrics import CHRF

    return CHRF(word_order=2)


def reference_streams(gold: Sequence[Sequence[str]]) -> list[list[str | None]]:
    """sacrebleu's reference layout: one stream per reference position, padded with None
    where a segment has fewer references than the widest one."""
    width = max((len(refs) for refs in gold), default=0)
    if any(len(refs) == 0 for refs in gold):
        raise ValueError("every segment needs at least one reference")
    return [[refs[i] if i < len(refs) else None for refs in gold] for i in range(width)]


def corpus_score(
    factory: Callable[[], SacreMetric], gold: Sequence[Any], pred: Sequence[str]
) -> float:
    """The corpus score of ``pred`` against ``gold`` (tuples of references)."""
    check_pair(gold, pred)
    if not pred:
        return 0.0
    refs = [_references(g) for g in gold]
    return float(factory().corpus_score(list(pred), cast(Any, reference_streams(refs))).score)


def corpus_replicates(
    factory: Callable[[], SacreMetric],
    gold: Sequence[Any],
    pred: Sequence[str],
    n_resamples: int,
    seed: int,
) -> np.ndarray:
    """The corpus score on each of ``n_resamples`` seeded resamples of the sentences."""
    n = check_pair(gold, pred)
    metric = factory()
    stats = sentence_statistics(metric, gold, pred)
    blocks = [
        scores_of_resamples(metric, stats, idx) for idx in resample_indices(n, n_resamples, seed)
    ]
    return np.concatenate(blocks)


def sentence_statistics(
    metric: SacreMetric, gold: Sequence[Any], pred: Sequence[str]
) -> np.ndarray:
    """sacrebleu's per-sentence sufficient statistics (sentences x statistics): private to
    sacrebleu, but the very numbers its corpus_score sums, so a resample's score equals
    corpus_score on the resampled sentences."""
    refs = [_references(g) for g in gold]
    rows = metric._extract_corpus_statistics(list(pred), cast(Any, reference_streams(refs)))
    return np.asarray(rows, dtype=float)


def scores_of_resamples(metric: SacreMetric, stats: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The corpus score of each row of the (resamples x n) index matrix ``idx``."""
    return np.asarray(
        [
            float(metric._compute_score_from_stats(_integral(summed)).score)
            for summed in stats[idx].sum(axis=1)
        ],
        dtype=float,
    )


def sentence_chrf(hypothesis: str, references: Sequence[str]) -> float:
    """chrF++ (0..100) of one sentence against its references."""
    return float(chrf_metric().sentence_score(hypothesis, list(references)).score)


def chrf_agreement(original: Sequence[str], perturbed: Sequence[str]) -> float:
    """Corpus chrF++ of a model's outputs on perturbed sources against its own outputs on
    the originals (Dynabench's rule: the reference is the model's own prediction)."""
    return corpus_score(chrf_metric, [(o,) for o in original], perturbed)


def _references(gold: Any) -> References:
    if isinstance(gold, str):
        return (gold,)
    return tuple(str(ref) for ref in gold)


def _integral(summed: np.ndarray) -> list[Any]:
    """Sufficient statistics are counts; BLEU's closed form expects ints, as sacrebleu's."""
    return [int(v) if float(v).is_integer() else float(v) for v in summed]
