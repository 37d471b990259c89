"""Compare two submissions on the same held-out examples: a paired bootstrap, server-side.

Both models' original-set predictions are kept by the worker (``worker.predictions``); the
gold labels are read here from the task's held-out sets and never leave the server: the
answer holds only the two performances, their difference and its interval.

Per set (round x dataset) scored on the same data by both models (same dataset hash, the
uids both answered), ``metrics.paired`` draws one resample of example indices per
replicate and scores both models on it with the task metric, seeded like the performance
interval of that set. Sets combine replicate by replicate the way the point estimate does
(a round is the mean of its datasets, the task the round-weighted mean), so the difference
is the difference of the ``performance`` the two submissions show.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from configs.schema import TaskSpec
from configs.vocabulary.refusals import Refused
from configs.vocabulary.results import ScoreKey
from evaluator.inputs.datasets import load_examples
from evaluator.inputs.perturbed_sets import dataset_hash
from evaluator.scoring.variants import bootstrap_seed, gold_of
from metrics.paired import PAIRED_METRICS, compare_replicates, paired_metric_replicates
from usecases.service import Service
from worker.predictions import load_predictions

CONFIDENCE = 0.95


def compare(service: Service, candidate_id: str, baseline_id: str) -> dict[str, Any]:
    """``candidate - baseline`` on the task metric with its paired 95 % interval; refused
    (not_found) for an unknown submission, (conflict) when the two cannot be compared yet."""
    found = {}
    for model_id in (candidate_id, baseline_id):
        submission = service.queries.submission(model_id)
        if submission is None:
            raise Refused("not_found", "unknown_submission", f"no submission {model_id!r}")
        found[model_id] = submission
    task_name = found[candidate_id]["task"]
    if found[baseline_id]["task"] != task_name:
        raise Refused(
            "conflict",
            "not_comparable",
            f"{candidate_id} is on {task_name!r}, {baseline_id} on {found[baseline_id]['task']!r}",
        )
    task = service.tasks.get(task_name)
    if task is None or task.metric not in PAIRED_METRICS:
        raise Refused("conflict", "not_comparable", f"task {task_name!r} has no paired comparison")
    stored = {}
    for model_id in (candidate_id, baseline_id):
        predictions = load_predictions(service.blobs, model_id)
        if predictions is None:
            raise Refused(
                "conflict",
                "no_predictions",
                f"submission {model_id} has no per-example predictions stored "
                "(not finished yet, failed, or scored before predictions were kept)",
            )
        stored[model_id] = _by_set(predictions)
    return _compare_sets(service, task, candidate_id, baseline_id, stored)


def _by_set(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(s["round"], s["dataset"]): s for s in document.get("sets", [])}


def _compare_sets(
    service: Service,
    task: TaskSpec,
    candidate_id: str,
    baseline_id: str,
    stored: dict[str, dict[tuple[str, str], dict[str, Any]]],
) -> dict[str, Any]:
    n_resamples, seed = task.bootstrap.n_resamples, task.bootstrap.seed
    rounds: list[dict[str, Any]] = []
    combined: list[tuple[float, float, float, np.ndarray, np.ndarray]] = []
    not_compared: list[str] = []
    for spec in task.rounds:
        per_set = []
        for dataset in spec.datasets:
            examples = load_examples(task, dataset, service.config_dir)
            digest = dataset_hash(examples)
            sets = [stored[m].get((spec.name, dataset.name)) for m in (candidate_id, baseline_id)]
            found = [s for s in sets if s is not None and s["dataset_hash"] == digest]
            if len(found) != 2:
                not_compared.append(f"{spec.name}/{dataset.name}")
                continue
            cand, base = (dict(zip(s["uids"], s["predictions"], strict=True)) for s in found)
            both = [e for e in examples if e.uid in cand and e.uid in base]
            if not both:
                not_compared.append(f"{spec.name}/{dataset.name}")
                continue
            set_seed = bootstrap_seed(seed, ScoreKey(task.name, spec.name, dataset.name, digest))
            per_set.append(
                (
                    len(both),
                    *paired_metric_replicates(
                        task.metric,
                        gold_of(task, both),
                        [cand[e.uid] for e in both],
                        [base[e.uid] for e in both],
                        task.labels,
                        n_resamples=n_resamples,
                        seed=set_seed,
                    ),
                )
            )
        if len(per_set) != len(spec.datasets):  # a round is compared on all its sets or none
            continue
        n = sum(item[0] for item in per_set)
        point_c = float(np.mean([item[1] for item in per_set]))
        point_b = float(np.mean([item[2] for item in per_set]))
        reps_c = np.mean([item[3] for item in per_set], axis=0)
        reps_b = np.mean([item[4] for item in per_set], axis=0)
        difference = compare_replicates(point_c, point_b, reps_c, reps_b, seed=seed)
        rounds.append({"round": spec.name, "n": n, **_shown(difference.to_dict())})
        combined.append((spec.weight, point_c, point_b, reps_c, reps_b))
    if not combined:
        raise Refused(
            "conflict",
            "not_comparable",
            "the two submissions share no round scored on the task's current data",
        )
    total = sum(item[0] for item in combined)
    overall = compare_replicates(
        sum(w * c for w, c, _, _, _ in combined) / total,
        sum(w * b for w, _, b, _, _ in combined) / total,
        np.sum([w * rc for w, _, _, rc, _ in combined], axis=0) / total,
        np.sum([w * rb for w, _, _, _, rb in combined], axis=0) / total,
        seed=seed,
        confidence=CONFIDENCE,
    )
    return {
        "candidate": candidate_id,
        "baseline": baseline_id,
        "task": task.name,
        "metric": task.metric,
        **_shown(overall.to_dict()),
        "n": sum(r["n"] for r in rounds),
        "rounds": rounds,
        "not_compared": not_compared,
    }


def _shown(values: dict[str, Any]) -> dict[str, Any]:
    """``PairedDifference.to_dict()`` with the two models' values named for the API."""
    return {
        "candidate_performance": values["candidate"],
        "baseline_performance": values["baseline"],
        "difference": values["difference"],
        "ci": [values["low"], values["high"]],
        "confidence": values["confidence"],
        "n_resamples": values["n_resamples"],
        "seed": values["seed"],
        "significant_drop": values["significant_drop"],
        "significant_gain": values["significant_gain"],
    }
