"""Fold keyed scores into the per-round table and the five Dynaboard axes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from configs.schema import RoundSpec, TaskSpec
from configs.vocabulary.results import ORIGINAL, POOLED, RoundRow, Score, pooled_variant
from evaluator.scoring.variants import AGREEMENT
from metrics.bootstrap import interval_of
from metrics.outputs import get_output_type


def _weighted_mean(pairs: Sequence[tuple[float | None, float]]) -> float | None:
    kept = [(value, weight) for value, weight in pairs if value is not None and weight > 0]
    total = sum(weight for _, weight in kept)
    return sum(value * weight for value, weight in kept) / total if total else None


def _on_originals(scores: Sequence[Score], round_name: str, metric: str) -> list[Score]:
    """The round's scores of ``metric`` on its sets' original examples (no slice)."""
    return [
        s for s in scores
        if s.key.round == round_name and not s.key.slice
        and s.key.variant == ORIGINAL and s.key.metric == metric
    ]  # fmt: skip


def _weighted(row: RoundRow, weight: float) -> RoundRow:
    row["weight"] = float(weight)
    return row


def _round_row(task: TaskSpec, round_name: str, scores: Sequence[Score]) -> RoundRow:
    mine = [s for s in scores if s.key.round == round_name and not s.key.slice]
    perf = _on_originals(scores, round_name, task.metric)
    agreements = [s for s in mine if s.key.metric == AGREEMENT]

    def pooled(axis: str) -> list[Score]:
        return [s for s in agreements if s.key.variant == pooled_variant(axis)]

    robust, fair = pooled("robustness"), pooled("fairness")
    row = RoundRow(
        round=round_name,
        performance=_weighted_mean([(s.value, 1.0) for s in perf]),
        n=sum(s.n for s in perf),
        datasets=[s.key.dataset for s in perf],
    )
    if len(perf) == 1:
        row["performance_ci"] = [perf[0].ci_low, perf[0].ci_high]
    row["robustness"] = _weighted_mean([(s.value, s.n) for s in robust])
    row["robustness_n"] = sum(s.n for s in robust)
    row["fairness"] = _weighted_mean([(s.value, s.n) for s in fair])
    row["fairness_n"] = sum(s.n for s in fair)
    per_variant = [s for s in agreements if not s.key.variant.startswith(POOLED)]
    row["variants"] = {
        name: _weighted_mean([(s.value, s.n) for s in per_variant if s.key.variant == name])
        for name in sorted({s.key.variant for s in per_variant})
    }
    on_perturbed = [
        s for s in mine if s.key.variant != ORIGINAL and s.key.metric == task.metric
    ]  # the perturbed examples scored against gold
    row["variant_performance"] = {
        name: _weighted_mean([(s.value, s.n) for s in on_perturbed if s.key.variant == name])
        for name in sorted({s.key.variant for s in on_perturbed})
    }
    return row


def round_replicates(
    spec: RoundSpec, replicates: Mapping[tuple[str, str], np.ndarray]
) -> np.ndarray | None:
    """Bootstrap replicates of a round's performance: the mean of its datasets' replicates
    (datasets weigh equally, as in the point estimate), None when one is missing."""
    sets = [replicates.get((spec.name, d.name)) for d in spec.datasets]
    present = [reps for reps in sets if reps is not None]
    if len(present) != len(sets):
        return None
    mean: np.ndarray = np.mean(present, axis=0)
    return mean


def overall_interval(
    task: TaskSpec, replicates: Mapping[tuple[str, str], np.ndarray]
) -> list[float] | None:
    """95 % interval of the round-weighted performance: every set is resampled with its own
    seed and the replicates are combined the same way the point estimate is combined."""
    per_round = [(round_replicates(spec, replicates), spec.weight) for spec in task.rounds]
    present = [(reps, weight) for reps, weight in per_round if reps is not None]
    if len(present) != len(per_round):
        return None
    total = sum(weight for _, weight in present)
    combined = np.sum([reps * weight for reps, weight in present], axis=0) / total
    interval = interval_of(combined)
    return [interval.low, interval.high]


def _round_interval(
    spec: RoundSpec, replicates: Mapping[tuple[str, str], np.ndarray]
) -> list[float] | None:
    reps = round_replicates(spec, replicates)
    if reps is None:
        return None
    interval = interval_of(reps)
    return [interval.low, interval.high]


def summarise(
    task: TaskSpec,
    scores: Sequence[Score],
    profile: dict[str, Any],
    replicates: Mapping[tuple[str, str], np.ndarray] | None = None,
    secondary_replicates: Mapping[str, Mapping[tuple[str, str], np.ndarray]] | None = None,
) -> tuple[dict[str, Any], list[RoundRow]]:
    """The five axes (rounds averaged with their weights first) and the per-round rows;
    for a type that reports metrics beside the task's own (BLEU beside chrF++), each
    round's value and interval of them and their round-weighted aggregate."""
    # each round says the weight it was rolled up with, so a board under other weights
    # knows the stored roll-up (and its interval) is not its own
    rounds = [_weighted(_round_row(task, r.name, scores), r.weight) for r in task.rounds]
    for spec, row in zip(task.rounds, rounds, strict=True):
        if replicates and len(spec.datasets) > 1:  # one dataset: its own interval is the round's
            row["performance_ci"] = _round_interval(spec, replicates)
    weights = {r.name: r.weight for r in task.rounds}
    summary: dict[str, Any] = {}
    for axis in ("performance", "robustness", "fairness"):
        summary[axis] = _weighted_mean([(row[axis], weights[row["round"]]) for row in rounds])
    throughput = profile.get("throughput") or {}
    memory = profile.get("memory") or {}
    summary["throughput"] = throughput.get("examples_per_s")
    summary["throughput_mode"] = throughput.get("mode")  # offline, or single_stream
    summary["throughput_spread"] = relative_range(throughput.get("examples_per_s_spread"))
    summary["memory"] = memory.get("avg_gib")
    summary["memory_peak"] = memory.get("peak_gib")
    summary["metric"] = task.metric
    summary["performance_ci"] = overall_interval(task, replicates) if replicates else None
    summary["conditions"] = measured_under(profile)
    beside = get_output_type(task.output_type).secondary_metrics(task.metric)
    if beside:
        _add_secondary(task, beside, scores, rounds, summary, secondary_replicates or {})
    return summary, rounds


def _add_secondary(
    task: TaskSpec,
    metrics: Sequence[str],
    scores: Sequence[Score],
    rounds: list[RoundRow],
    summary: dict[str, Any],
    replicates: Mapping[str, Mapping[tuple[str, str], np.ndarray]],
) -> None:
    """``secondary`` and ``secondary_ci`` (metric -> value, interval) on every round row
    and on the summary, combined like performance: sets average within a round, rounds
    by their weights; an interval only where every set's replicates are known."""
    weights = {r.name: r.weight for r in task.rounds}
    for spec, row in zip(task.rounds, rounds, strict=True):
        row["secondary"], row["secondary_ci"] = {}, {}
        for metric in metrics:
            found = _on_originals(scores, spec.name, metric)
            row["secondary"][metric] = _weighted_mean([(s.value, 1.0) for s in found])
            if len(spec.datasets) > 1:
                row["secondary_ci"][metric] = _round_interval(spec, replicates.get(metric, {}))
            elif len(found) == 1 and found[0].ci_low is not None:
                row["secondary_ci"][metric] = [found[0].ci_low, found[0].ci_high]
            else:
                row["secondary_ci"][metric] = None
    summary["secondary"] = {
        metric: _weighted_mean(
            [(row["secondary"][metric], weights[row["round"]]) for row in rounds]
        )
        for metric in metrics
    }
    summary["secondary_ci"] = {
        metric: overall_interval(task, replicates[metric]) if metric in replicates else None
        for metric in metrics
    }


def relative_range(spread: Any) -> float | None:
    """The repeats' range over their median (the board's throughput resolution reads it);
    None without at least two repeats."""
    if not isinstance(spread, Mapping):
        return None
    found = [spread.get(k) for k in ("min", "max", "median", "n")]
    numbers = [float(v) for v in found if isinstance(v, int | float)]
    if len(numbers) < len(found):
        return None
    low, high, median, n = numbers
    if n < 2 or median <= 0:
        return None
    return (high - low) / median


def measured_under(profile: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the leaderboard compares of the measurement conditions: the fingerprint, its
    label and the comparable fields (None: not recorded)."""
    conditions = profile.get("conditions")
    if not isinstance(conditions, Mapping) or "fingerprint" not in conditions:
        return None
    return {key: conditions.get(key) for key in ("fingerprint", "label", "comparable")}
