"""Scored models written straight through the store (no model containers): a sentiment
leaderboard with trade-offs, a partial model, an unranked one, and a failed submission."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from configs.vocabulary.failures import FailureCode
from configs.vocabulary.results import EvaluationResult, Failure, Score, ScoreKey, pooled_variant
from usecases.service import Service

TASK = "sentiment"
DOCKER = {"kind": "docker", "image": "registry.local/model:1", "protocol": "v1"}
SECRET_LOG = "Traceback: secret-log-tail-must-not-appear"
TOPICS = {"movies": 19, "people": 11, "products": 20, "restaurants": 17, "travel": 4}
VARIANTS = {
    "typo": ("robustness", "1"),
    "paraphrase": ("robustness", "1"),
    "fairness": ("fairness", "3.1"),
    "fairness-ethnicity": ("fairness", "3.1"),
}

# name: per-round performance, throughput (examples/s), memory (GiB), robustness, fairness
MODELS: dict[str, tuple[list[float], float | None, float, float, float | None]] = {
    "roberta-large": ([92.0, 78.5, 70.2], 180.0, 1.62, 88.1, 95.3),
    "distilbert": ([88.4, 70.1, 61.7], 910.0, 0.61, 85.2, 93.9),
    "sentiment-lexicon": ([97.6, 51.2, 29.4], 24182.7, 0.021, 92.8, 100.0),
    "majority-baseline": ([33.3, 31.0, 30.4], 61000.0, 0.015, 100.0, 100.0),
    "bilstm": ([80.3, 62.2, 50.9], 3050.0, 0.32, 80.4, 90.2),
}
PARTIAL = ("t5-small (old data)", [66.0, 58.0], 450.0, 0.9, 84.0, 92.0)
UNRANKED = ("no-fairness-run", [75.0, 60.0, 55.0], 1200.0, 0.4, 83.0, None)


def _mean(values: list[float]) -> float:
    return sum(v * 1.0 for v in values) / sum(1.0 for _ in values)


def result(
    service: Service,
    rounds_perf: list[float],
    throughput: float | None,
    memory: float,
    robustness: float,
    fairness: float | None,
    *,
    seed: int,
) -> EvaluationResult:
    """A result shaped like the evaluator's (rounds, slices, scores, provenance)."""
    task = service.tasks[TASK]
    hashes = service.dataset_hashes(TASK)
    names = [spec.name for spec in task.rounds][: len(rounds_perf)]
    rounds, scores, slices, perturbations = [], [], [], []
    for i, (name, perf) in enumerate(zip(names, rounds_perf, strict=True)):
        digest = hashes[f"{name}/test"]
        key = ScoreKey(TASK, name, "test", digest, metric=task.metric)
        half = 3.0 + i
        ci = [max(0.0, perf - half), min(100.0, perf + half)]
        scores.append(Score(key, perf, 84, *ci))
        by_group = {
            topic: max(0.0, min(100.0, perf + ((j * 7 + seed * 3) % 17) - 8))
            for j, topic in enumerate(TOPICS)
        }
        for topic, value in by_group.items():
            scores.append(
                Score(dataclasses.replace(key, slice=f"topic={topic}"), value, TOPICS[topic])
            )
        worst = min(by_group, key=lambda t: by_group[t])
        slices.append(
            {
                "round": name,
                "dataset": "test",
                "column": "topic",
                "by_group": by_group,
                "sizes": TOPICS,
                "small_groups": ["travel"],
                "difference": max(by_group.values()) - min(by_group.values()),
                "ratio": min(by_group.values()) / max(by_group.values()),
                "worst_group": worst,
                "overall": perf,
            }
        )
        variants, variant_perf = {}, {}
        for variant, (axis, version) in VARIANTS.items():
            value = robustness if axis == "robustness" else (fairness or 0.0)
            variants[variant] = value - i
            variant_perf[variant] = perf - 2.0
            vkey = dataclasses.replace(key, variant=variant, variant_version=version)
            scores.append(Score(dataclasses.replace(vkey, metric="agreement"), value - i, 40))
            scores.append(Score(vkey, perf - 2.0, 40))
            perturbations.append(
                {
                    "round": name,
                    "dataset": "test",
                    "variant": variant,
                    "total": 84,
                    "changed": 40,
                    "version": version,
                    "seed": 0,
                    "from_cache": True,
                }
            )
        for axis, value in (("robustness", robustness), ("fairness", fairness)):
            if value is not None:
                pkey = dataclasses.replace(key, variant=pooled_variant(axis), metric="agreement")
                scores.append(Score(pkey, value - i, 80))
        rounds.append(
            {
                "round": name,
                "performance": perf,
                "n": 84,
                "datasets": ["test"],
                "performance_ci": ci,
                "robustness": robustness - i,
                "robustness_n": 80,
                "fairness": None if fairness is None else fairness - i,
                "fairness_n": 80,
                "variants": variants,
                "variant_performance": variant_perf,
            }
        )
    summary: dict[str, Any] = {
        "performance": _mean([r["performance"] for r in rounds]),
        "robustness": _mean([r["robustness"] for r in rounds]),
        "fairness": None if fairness is None else _mean([r["fairness"] for r in rounds]),
        "throughput": throughput,
        "memory": memory,
        "memory_peak": memory * 1.2,
        "metric": task.metric,
    }
    summary["performance_ci"] = [summary["performance"] - 2.5, summary["performance"] + 2.5]
    image_id = "sha256:" + f"{seed:02d}" * 32
    return EvaluationResult(
        task=TASK,
        status="done",
        summary=summary,
        rounds=rounds,
        scores=scores,
        slices=slices,
        profile={
            "ready_s": 0.5,
            "throughput": {
                "examples_per_s": throughput,
                "latency_ms_p50": 4.0,
                "latency_ms_p90": 6.5,
                "latency_ms_p99": 9.0,
                "batches": 8,
                "examples": 256,
            },
            "memory": {"avg_gib": memory, "peak_gib": memory * 1.2, "samples": 25},
        },
        provenance={
            "task_version": task.version,
            "code_version": "0.1.0+gtest",
            "dataset_hashes": {f"{n}/test": hashes[f"{n}/test"] for n in names},
            "perturbations": perturbations,
            "runtime": {
                "kind": "docker",
                "image": DOCKER["image"],
                "image_id": image_id,
                "protocol": "v1",
                "command": ["/secret/path/model.py"],
            },
            "limits": dataclasses.asdict(task.limits),
            "duration_s": 12.5,
        },
    )


def finish(service: Service, name: str, evaluation: EvaluationResult) -> str:
    """A submission of ``evaluation.task`` claimed and finished with ``evaluation``."""
    model_id, job_id = service.store.submit(evaluation.task, name, DOCKER)
    claimed = service.store.claim("seed-worker", 60)
    assert claimed is not None and claimed.id == job_id
    assert service.store.finish(job_id, "seed-worker", evaluation, lease=claimed.lease)
    return model_id


def seed(service: Service) -> dict[str, str]:
    """Every seeded model's id by name (the failed submission's under ``"failed"``)."""
    from worker.lifecycle import settle_failure

    ids = {}
    for i, (name, (perf, tput, mem, rob, fair)) in enumerate(MODELS.items()):
        ids[name] = finish(service, name, result(service, perf, tput, mem, rob, fair, seed=i + 1))
    name, perf, tput, mem, rob, fair = PARTIAL
    ids[name] = finish(service, name, result(service, perf, tput, mem, rob, fair, seed=8))
    name, perf, tput, mem, rob, fair = UNRANKED
    ids[name] = finish(service, name, result(service, perf, tput, mem, rob, fair, seed=9))
    model_id, job_id = service.store.submit(TASK, "crashes-on-boot", DOCKER)
    claimed = service.store.claim("seed-worker", 60)
    assert claimed is not None and claimed.id == job_id
    settle_failure(
        service.store,
        claimed,
        "seed-worker",
        Failure(FailureCode.NEVER_HEALTHY, "no /health in 60 s", SECRET_LOG),
    )
    ids["failed"] = model_id
    return ids


def seed_single(service: Service) -> str:
    """The only model of the ``nli`` task: its Dynascore is undefined."""
    task = service.tasks["nli"]
    hashes = service.dataset_hashes("nli")
    name = task.rounds[0].name
    dataset = task.rounds[0].datasets[0].name
    key = ScoreKey("nli", name, dataset, hashes[f"{name}/{dataset}"], metric=task.metric)
    axes = {
        "performance": 61.0,
        "throughput": 500.0,
        "memory": 0.2,
        "robustness": 90.0,
        "fairness": 97.0,
    }
    evaluation = EvaluationResult(
        task="nli",
        status="done",
        summary={**axes, "metric": task.metric, "memory_peak": 0.25},
        rounds=[{"round": name, "performance": 61.0, "performance_ci": [58.0, 64.0]}],
        scores=[Score(key, 61.0, 100, 58.0, 64.0)],
        provenance={"code_version": "0.1.0+gtest", "dataset_hashes": dict(hashes)},
    )
    return finish(service, "lonely-model", evaluation)


def seed_unmeasured(service: Service) -> list[str]:
    """Three models of the ``vqa`` task, which measures no fairness: their rows hold none."""
    task = service.tasks["vqa"]
    hashes = service.dataset_hashes("vqa")
    ids = []
    for i, (perf, tput, mem, rob) in enumerate(
        [(89.0, 180.0, 0.03, 82.0), (50.2, 92000.0, 0.021, 95.9), (70.0, 900.0, 0.5, 88.0)]
    ):
        rows = [{"round": r.name, "performance": perf, "performance_ci": [perf - 4, perf + 4]}
                for r in task.rounds]  # fmt: skip
        summary = {"performance": perf, "throughput": tput, "memory": mem, "robustness": rob,
                   "fairness": None, "metric": task.metric, "memory_peak": mem}  # fmt: skip
        evaluation = EvaluationResult(
            task="vqa",
            status="done",
            summary=summary,
            rounds=rows,
            provenance={"code_version": "0.1.0+gtest", "dataset_hashes": dict(hashes)},
        )
        ids.append(finish(service, f"vqa-model-{i}", evaluation))
    return ids


def seed_translation(service: Service) -> list[str]:
    """Two ``translation`` models whose rounds carry BLEU beside chrF++ (with intervals)."""
    from evaluator.scoring.rollup import summarise

    task = service.tasks["translation"]
    hashes = service.dataset_hashes("translation")
    ids = []
    for i, (chrf, bleu) in enumerate([((60.0, 40.0), (30.0, 10.0)), ((50.0, 48.0), (20.0, 18.0))]):
        scores = []
        for rnd, c, b in zip(("r1", "r2"), chrf, bleu, strict=True):
            key = ScoreKey("translation", rnd, "test", hashes[f"{rnd}/test"], metric="chrf")
            scores += [Score(key, c, 84, c - 5, c + 5),
                       Score(dataclasses.replace(key, metric="bleu"), b, 84, b - 4, b + 4)]  # fmt: skip
        rng = np.random.default_rng(i)
        reps = {
            "bleu": {
                (r, "test"): rng.normal(b, 2.0, 200)
                for r, b in zip(("r1", "r2"), bleu, strict=True)
            }
        }
        summary, rounds = summarise(task, scores, {}, None, reps)
        rounds = [{**r, "robustness": 90.0 - i, "fairness": 95.0} for r in rounds]
        summary.update(throughput=500.0 * (i + 1), memory=0.1, memory_peak=0.1)
        summary.update(robustness=90.0 - i, fairness=95.0)
        evaluation = EvaluationResult(
            task="translation",
            status="done",
            summary=summary,
            rounds=rounds,
            scores=scores,
            provenance={"code_version": "0.1.0+gtest", "dataset_hashes": dict(hashes)},
        )
        ids.append(finish(service, f"mt-model-{i}", evaluation))
    return ids
