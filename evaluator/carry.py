"""What a backfill keeps of a model's newest result (store.backfill.CarriedResult): a set
version the base scored, with stored predictions matching it row for row, is carried over
instead of being sent to the model again. The predictions give the set's bootstrap
replicates back (the aggregate intervals need every set's), without a model call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from configs.schema import TaskSpec
from configs.vocabulary.examples import Example, Prediction
from configs.vocabulary.results import Score, ScoreKey, SliceRow
from evaluator.scoring import variants
from store.backfill import CarriedResult


@dataclass(frozen=True)
class KeptSet:
    """One set version carried over: its scores, replicates, predictions and reports."""

    scores: list[Score]
    replicates: np.ndarray
    predictions: list[Prediction]
    slices: list[SliceRow]
    variant_counts: list[dict[str, Any]]


def keep_set(
    task: TaskSpec, carried: CarriedResult, base: ScoreKey, examples: Sequence[Example]
) -> KeptSet | None:
    """The base's results on this set version, or None when it must be scored: the base
    never scored this version, or its stored predictions do not match it row for row."""
    scores = carried.set_scores(base.round, base.dataset, base.dataset_hash)
    stored = carried.predictions.get((base.round, base.dataset))
    uids = tuple(e.uid for e in examples)
    if not scores or stored is None:
        return None
    if (stored.dataset_hash, stored.uids) != (base.dataset_hash, uids):
        return None
    predictions = [Prediction(u, o) for u, o in zip(uids, stored.outputs, strict=True)]
    _, replicates = variants.performance_with_replicates(task, base, examples, predictions)
    same_set = {"round": base.round, "dataset": base.dataset}
    counts = carried.provenance.get("perturbations") or []
    return KeptSet(
        scores,
        replicates,
        predictions,
        [r for r in carried.slices if _of_set(r, same_set)],
        [c for c in counts if _of_set(c, same_set)],
    )


def backfill_provenance(
    carried: CarriedResult, dataset_hashes: Mapping[str, str], kept: Sequence[str]
) -> dict[str, Any]:
    """Which result a backfill built on, which sets it kept and which it scored."""
    scored = [name for name in dataset_hashes if name not in kept]
    return {"backfill": {"base_job": carried.job_id, "kept": list(kept), "scored": scored}}


def _of_set(entry: Any, wanted: Mapping[str, str]) -> bool:
    return isinstance(entry, Mapping) and all(entry.get(k) == v for k, v in wanted.items())
