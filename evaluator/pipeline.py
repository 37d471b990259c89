"""Evaluate one model on one task: every round, every variant, a profiling pass.

Reads like the data flow: start → wait ready → for each round and dataset: originals,
perturbed sets (materialised once, cached) → profile → stop (always) → result. A model
failure ends in a Failure with its code and the log tail (held-out text withheld); it never
raises. The model never sees a dataset uid: each pass sends opaque wire ids.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from configs.paths import CONFIG_DIR
from configs.schema import DatasetSpec, PerturbationSpec, RoundSpec, TaskSpec
from configs.vocabulary.examples import Example, Prediction
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.results import (
    ORIGINAL,
    EvaluationResult,
    Failure,
    Score,
    ScoreKey,
    SliceRow,
    pooled_variant,
)
from evaluator.carry import backfill_provenance, keep_set
from evaluator.conditions import collect as collect_conditions
from evaluator.errors import EXIT_SYMPTOMS, EvaluationError, EvaluationStopped
from evaluator.inputs.datasets import load_examples
from evaluator.inputs.perturbed_sets import check_perturbed_images, dataset_hash, materialise
from evaluator.inputs.redaction import HeldOutText
from evaluator.prediction_log import PredictionLog
from evaluator.profiling import (
    GpuSampler,
    MemorySampler,
    evaluator_cpus,
    pinned,
    profile_throughput,
)
from evaluator.provenance import code_version
from evaluator.runtimes.runtime import ExitReason, Runtime
from evaluator.scoring import variants
from evaluator.scoring.rollup import summarise
from evaluator.scoring.spbleu import installed_sha256
from evaluator.transport.client import ModelClient
from metrics.outputs import get_output_type
from perturbations.perturbation import get_perturbation
from store.backfill import CarriedResult
from store.blobs import BlobStore

log = logging.getLogger(__name__)
Progress = Callable[[float, str], None]


@dataclass
class RunState:
    """Everything one evaluation accumulates; the pipeline's explicit context."""

    scores: list[Score] = field(default_factory=list)
    slices: list[SliceRow] = field(default_factory=list)
    dataset_hashes: dict[str, str] = field(default_factory=dict)
    variant_counts: list[dict[str, Any]] = field(default_factory=list)
    replicates: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    # metric -> (round, dataset) -> replicates, for the metrics reported beside the task's
    secondary_replicates: dict[str, dict[tuple[str, str], np.ndarray]] = field(default_factory=dict)
    steps_done: int = 0


class Evaluation:
    """One model × one task. Use ``run()``; the runtime is stopped whatever happens."""

    def __init__(
        self,
        task: TaskSpec,
        runtime: Runtime,
        blobs: BlobStore,
        *,
        config_dir: Path = CONFIG_DIR,
        progress: Progress | None = None,
        save_predictions: Path | None = None,
        carried: CarriedResult | None = None,
        gpu_sampler: GpuSampler | None = None,
    ) -> None:
        """``carried``: a backfill's base (see store.backfill): sets it scored at their
        current version are kept, not sent again, and its profile stands. ``gpu_sampler``:
        the model's GPUs, sampled with its memory (the profile's ``gpu``)."""
        self.task = task
        self.runtime = runtime
        self.blobs = blobs
        self.config_dir = config_dir
        self.progress = progress or (lambda fraction, stage: None)
        self.predictions_log = PredictionLog(save_predictions) if save_predictions else None
        self.state = RunState()
        self.carried = carried
        self.gpu_sampler = gpu_sampler
        self.kept_sets: list[str] = []  # carried over unchanged, not sent to the model
        self.held_out = HeldOutText()
        self.client: ModelClient | None = None
        self.sampler: MemorySampler | None = None
        self.deadline = 0.0
        self.profile: dict[str, Any] = {}
        self.started_at = 0.0
        variant_count = 1 + len(task.robustness) + len(task.fairness)
        self.total_steps = sum(len(r.datasets) for r in task.rounds) * variant_count + 1

    # -- the flow ---------------------------------------------------------------------------
    def run(self) -> EvaluationResult:
        self.started_at = time.monotonic()
        self.deadline = self.started_at + self.task.limits.total_s
        failure: Failure | None = None
        try:
            if self.carried is None:
                self.start_model()
            for round_spec in self.task.rounds:
                self.score_round(round_spec)
            if self.carried is None:
                self.profile_model()
            else:  # a backfill measures nothing new: the base's profile stands
                self.profile = dict(self.carried.profile)
                self.progress(1.0, "backfilled")
        except EvaluationError as exc:
            failure = self.explain(exc)
        except EvaluationStopped as exc:
            log.info("evaluation of %s stopped: %s", self.task.name, exc)
            failure = Failure(FailureCode.PLATFORM_ERROR, f"stopped: {exc}")
        except Exception as exc:  # a platform fault must still end the job with a reason
            log.exception("evaluation of %s failed on the platform side", self.task.name)
            failure = Failure(
                FailureCode.PLATFORM_ERROR, f"{type(exc).__name__}: {exc}", self.failure_log()
            )
        finally:
            self.stop_model()
        return self.result(failure)

    def start_model(self) -> None:
        self.progress(0.0, "starting")
        try:
            endpoint = self.runtime.start()
        except OSError as exc:  # the model's command could not be run (process runtime)
            raise EvaluationError(
                FailureCode.START_FAILED, f"could not start the model: {exc}"
            ) from exc
        # Runtimes classify their own failures; anything else is a platform fault (run()).
        self.client = ModelClient(endpoint, self.task, self.task.limits)
        budget = min(self.task.limits.startup_s, self.remaining())
        waited = self.client.wait_ready(budget, self.runtime.alive)
        self.profile["ready_s"] = round(waited, 3)
        interval = self.task.profiling.sample_interval_s
        self.sampler = MemorySampler(self.runtime, interval, self.gpu_sampler).start()

    def score_round(self, round_spec: RoundSpec) -> None:
        round_scores: list[Score] = []
        for dataset in round_spec.datasets:
            round_scores.extend(self.score_dataset(round_spec, dataset))
        self.state.scores.extend(round_scores)

    def score_dataset(self, round_spec: RoundSpec, dataset: DatasetSpec) -> list[Score]:
        examples = load_examples(self.task, dataset, self.config_dir)
        digest = dataset_hash(examples)
        self.state.dataset_hashes[f"{round_spec.name}/{dataset.name}"] = digest
        base = ScoreKey(self.task.name, round_spec.name, dataset.name, digest)
        kept = self.keep_carried(base, examples)
        if kept is not None:
            return kept
        if self.client is None:  # a backfill starts the model once a set needs it
            self.start_model()
        self.step(f"round {round_spec.name} / {dataset.name}: original")
        predictions = self.predict_all(examples, base, "original")
        performance, replicates = variants.performance_with_replicates(
            self.task, base, examples, predictions
        )
        self.state.replicates[(round_spec.name, dataset.name)] = replicates
        scores = [performance]
        beside, beside_reps = variants.secondary_with_replicates(
            self.task, base, examples, predictions
        )
        scores += beside
        for metric, reps in beside_reps.items():
            self.state.secondary_replicates.setdefault(metric, {})[
                (round_spec.name, dataset.name)
            ] = reps
        slice_scores, reports = variants.slice_scores(self.task, base, examples, predictions)
        scores += slice_scores
        self.state.slices.extend(reports)
        by_uid = {p.uid: p for p in predictions}
        for axis, specs in (("robustness", self.task.robustness), ("fairness", self.task.fairness)):
            runs = [self.run_variant(axis, spec, examples, digest, base) for spec in specs]
            for run in runs:
                scores += variants.variant_scores(self.task, base, by_uid, run)
            value, n = variants.pooled_agreement(self.task, by_uid, runs)
            key = ScoreKey(
                self.task.name, round_spec.name, dataset.name, digest, pooled_variant(axis)
            )
            scores.append(Score(_with_metric(key, variants.AGREEMENT), value, n))
        return scores

    def keep_carried(self, base: ScoreKey, examples: Sequence[Example]) -> list[Score] | None:
        """A backfill's base scores of this set version (None: it must be scored)."""
        kept = keep_set(self.task, self.carried, base, examples) if self.carried else None
        if kept is None:
            return None
        self.state.replicates[(base.round, base.dataset)] = kept.replicates
        if self.predictions_log is not None:  # the kept blob stays whole (worker.predictions)
            self.predictions_log.write(base, ORIGINAL, examples, kept.predictions)
        self.state.slices += kept.slices
        self.state.variant_counts += kept.variant_counts
        self.state.steps_done += 1 + len(self.task.robustness) + len(self.task.fairness)
        self.kept_sets.append(f"{base.round}/{base.dataset}")
        return kept.scores

    def run_variant(
        self,
        axis: str,
        spec: PerturbationSpec,
        examples: Sequence[Example],
        digest: str,
        base: ScoreKey,
    ) -> variants.VariantRun:
        self.step(f"round {base.round} / {base.dataset}: {spec.name}")
        perturbation = get_perturbation(spec.name)
        # Noise (typos, paraphrases, image noise) hits the task's perturb_fields of its kind;
        # a term swap must change every text field alike, or a renamed person in the
        # hypothesis is no longer the context's.
        fields = self.task.fields_to_perturb(perturbation.field_kind, perturbation.swaps_terms)
        perturbed = materialise(examples, digest, perturbation, spec.seed, fields, self.blobs)
        if perturbation.field_kind == "image":
            check_perturbed_images(self.task, spec.name, perturbed.examples, fields)
        predictions = self.predict_all(perturbed.examples, base, spec.name)
        self.state.variant_counts.append(
            {
                "round": base.round,
                "dataset": base.dataset,
                "variant": spec.name,
                "total": perturbed.total,
                "changed": perturbed.changed,
                "version": perturbed.version,
                "seed": spec.seed,
                "from_cache": perturbed.from_cache,
            }
        )
        return variants.VariantRun(
            axis,
            spec.name,
            perturbed.version,
            spec.seed,
            perturbed.total,
            tuple(perturbed.examples),
            tuple(predictions),
        )

    def profile_model(self) -> None:
        self.step("profiling")
        first = self.task.rounds[0]
        examples = load_examples(self.task, first.datasets[0], self.config_dir)
        self.held_out.add(examples)
        assert self.client is not None
        requests = itertools.count()  # every profiling request gets its own wire ids
        with pinned(evaluator_cpus(self.runtime)):  # off the model's own CPUs, if it has any
            self.profile["throughput"] = profile_throughput(
                lambda batch: self.predict_batch(batch, f"profiling/{next(requests)}"),
                examples,
                batch_size=self.task.batch_size,
                spec=self.task.profiling,
                one_example_per_request=self.client.one_example_per_request,
            )
        self.profile["conditions"] = collect_conditions(self.runtime).to_dict()
        self.progress(1.0, "profiled")

    def stop_model(self) -> None:
        if self.sampler is not None and self.carried is None:
            self.sampler.stop()
            self.profile["memory"] = self.sampler.summary()
            gpus = self.sampler.gpu_summary()
            if gpus is not None:
                self.profile["gpu"] = gpus
        if self.client is not None:
            self.client.close()
        try:
            self.runtime.stop()
        except Exception:  # stopping must never hide the evaluation's own outcome
            log.exception("stopping the %s runtime failed", self.runtime.kind)

    # -- helpers ----------------------------------------------------------------------------
    def predict_all(
        self, examples: Sequence[Example], base: ScoreKey, variant: str
    ) -> list[Prediction]:
        self.held_out.add(examples)
        size = self.task.batch_size
        predictions: list[Prediction] = []
        for start in range(0, len(examples), size):
            predictions.extend(self.predict_batch(examples[start : start + size], variant))
        if self.predictions_log is not None:
            self.predictions_log.write(base, variant, examples, predictions)
        return predictions

    def predict_batch(self, batch: Sequence[Example], variant: str) -> list[Prediction]:
        """One request, due within ``request_s`` and within what is left of ``total_s``."""
        remaining = self.remaining()
        if remaining <= 0:
            raise self.total_timeout()
        assert self.client is not None
        timeout = min(self.task.limits.request_s, remaining)
        try:
            return self.client.predict(
                batch, timeout=timeout, variant=variant, total_deadline=self.deadline
            )
        except EvaluationError as exc:
            # A request cut short by the wall-clock budget is the budget's timeout, not its own.
            cut = exc.code is FailureCode.REQUEST_TIMEOUT and timeout < self.task.limits.request_s
            if cut or exc.code is FailureCode.TOTAL_TIMEOUT:
                raise self.total_timeout() from None
            raise
        except Exception as exc:  # handling the model's reply must not pass for our fault
            log.exception("reading a reply of the model for %s failed", self.task.name)
            raise EvaluationError(
                FailureCode.BAD_PREDICTION, f"the reply could not be handled ({exc!r:.200})"
            ) from None

    def total_timeout(self) -> EvaluationError:
        return EvaluationError(
            FailureCode.TOTAL_TIMEOUT,
            f"the evaluation exceeded its wall-clock budget of {self.task.limits.total_s:g} s",
        )

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def step(self, stage: str) -> None:
        self.progress(self.state.steps_done / self.total_steps, stage)
        self.state.steps_done += 1

    def safe_logs(self) -> str:
        try:
            return self.runtime.logs_tail(self.task.limits.max_log_bytes)
        except Exception:  # the log is a courtesy; its absence must not mask the failure
            return ""

    def failure_log(self, tail: str = "") -> str:
        """The log tail for a Failure, every line quoting held-out input text withheld."""
        try:
            return self.held_out.redact(tail or self.safe_logs())
        except Exception:  # never risk the data: no tail rather than an unredacted one
            log.exception("redacting the log tail of %s failed", self.task.name)
            return ""

    def failure_text(self, message: str) -> str:
        """The failure sentence, redacted like the log: it may quote the model's reply."""
        try:
            return self.held_out.redact(message)
        except Exception:  # never risk the data: the code alone still explains the failure
            log.exception("redacting the failure message of %s failed", self.task.name)
            return "the model's reply could not be shown"

    def explain(self, exc: EvaluationError) -> Failure:
        """Prefer the runtime's own account (OOM kill, exit code) over the symptom seen."""
        code, message = exc.code, exc.message
        reason = self.exit_reason() if exc.code in EXIT_SYMPTOMS else None
        if reason is not None:
            code, message = reason.code, f"{reason.sentence} ({exc.message})"
        return Failure(code, self.failure_text(message), self.failure_log(exc.log_tail))

    def exit_reason(self) -> ExitReason | None:
        """The runtime's reason for the model's exit, if it gives a usable one: the model's
        own doing (an exit code, OOM), or the platform's (the engine saw the sandbox killed
        from outside, the guard lost its worker). An unknown code or an exception leaves
        the symptom seen as the failure."""
        time.sleep(0.2)  # let the engine record the exit before asking why
        try:
            reason = self.runtime.exit_reason()
            if reason is None:
                return None
            # A third-party runtime may still hand back a code of its own.
            reason = ExitReason(FailureCode(reason.code), reason.sentence)
        except Exception:
            log.exception("the %s runtime could not explain the failure", self.runtime.kind)
            return None
        if reason.code.user_caused or reason.code.platform_fault:
            return reason
        return None

    def result(self, failure: Failure | None) -> EvaluationResult:
        result = EvaluationResult(
            task=self.task.name,
            status="failed" if failure else "done",
            failure=failure,
            profile=self.profile,
            provenance=self.provenance(),
        )
        if failure is None:
            summary, rounds = summarise(
                self.task,
                self.state.scores,
                self.profile,
                self.state.replicates,
                self.state.secondary_replicates,
            )
            result.summary, result.rounds = summary, rounds
            result.scores, result.slices = self.state.scores, self.state.slices
        return result

    def provenance(self) -> dict[str, Any]:
        info = self.runtime.info()
        return {
            "task_version": self.task.version,
            "code_version": code_version(),
            "dataset_hashes": self.state.dataset_hashes,
            "perturbations": self.state.variant_counts,
            "runtime": {"kind": info.kind, **info.details},
            "limits": self.task.limits.__dict__,
            "conditions": self.profile.get("conditions"),  # None: failed before profiling
            "duration_s": round(time.monotonic() - self.started_at, 3),
            **self.spbleu_provenance(),
            **self.backfill_provenance(),
        }

    def spbleu_provenance(self) -> dict[str, Any]:
        """Which SentencePiece model spBLEU used, when it scored this run."""
        output = get_output_type(self.task.output_type)
        uses = "spbleu" in (self.task.metric, *output.secondary_metrics(self.task.metric))
        model = installed_sha256() if uses else None
        return {"spbleu_model_sha256": model} if model else {}

    def backfill_provenance(self) -> dict[str, Any]:
        if self.carried is None:
            return {}
        return backfill_provenance(self.carried, self.state.dataset_hashes, self.kept_sets)


def _with_metric(key: ScoreKey, metric: str) -> ScoreKey:
    return replace(key, metric=metric)


def run_evaluation(
    task: TaskSpec,
    runtime: Runtime,
    blobs: BlobStore,
    *,
    config_dir: Path = CONFIG_DIR,
    progress: Progress | None = None,
    save_predictions: Path | None = None,
    carried: CarriedResult | None = None,
    gpu_sampler: GpuSampler | None = None,
) -> EvaluationResult:
    """Evaluate the model behind ``runtime`` on every round of ``task`` (a backfill: on the
    sets ``carried`` lacks at their current version; ``gpu_sampler``: see Evaluation)."""
    evaluation = Evaluation(
        task,
        runtime,
        blobs,
        config_dir=config_dir,
        progress=progress,
        save_predictions=save_predictions,
        carried=carried,
        gpu_sampler=gpu_sampler,
    )
    return evaluation.run()
