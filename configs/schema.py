"""Task specs: YAML files become frozen, validated objects (errors name file and field)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Limits:
    """Resource limits and time budgets for one model (from the task config)."""

    memory_gib: float = 2.0
    cpus: float = 1.0
    pids: int = 256
    tmpfs_mib: int = 64
    startup_s: float = 60.0
    request_s: float = 30.0
    total_s: float = 1800.0
    max_reply_bytes: int = 8 * 1024 * 1024
    max_image_bytes: int = 2 * 1024**3
    max_log_bytes: int = 64 * 1024
    # One image input field of one example, decoded (PNG or JPEG), checked before it is sent.
    max_input_image_bytes: int = 1024 * 1024
    # Requests in flight to a model that takes one example per request (Dynabench's
    # single_evaluation route). 1 by default: Dynabench's templates run one uvicorn worker
    # that answers synchronously, so more would only queue while their deadlines run.
    single_route_concurrency: int = 1


class ConfigError(ValueError):
    """A config file is invalid; the message names the file and the field."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        super().__init__(f"{source}: {field}: {problem}")
        self.source, self.field, self.problem = source, field, problem


class SpecValueError(ValueError):
    """A spec's own check failed: ``field`` (within the spec) and the problem."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field, self.problem = field, problem


@dataclass(frozen=True)
class DatasetSpec:
    """One held-out set of a round (a JSONL file, path relative to configs/)."""

    name: str
    path: str
    # Published (a dev set, or data that ships with Dynaeval): a model's page may show a few
    # of its examples with the model's predictions. Scored like any other set of its round.
    public: bool = False


@dataclass(frozen=True)
class RoundSpec:
    """A named round (names are opaque: 'r12' is never parsed as digits)."""

    name: str
    datasets: tuple[DatasetSpec, ...]
    weight: float = 1.0


@dataclass(frozen=True)
class PerturbationSpec:
    """A perturbation by registry name and seed, scored on one axis."""

    name: str
    seed: int = 0


@dataclass(frozen=True)
class ProfilingSpec:
    """How a model is profiled, in the manner of MLPerf LoadGen: untimed warm-up batches,
    then ``repeats`` times an offline pass (requests of the task's batch size, giving
    examples/s) and a single-stream pass (one example per request, giving latency
    percentiles). Each pass runs until it has lasted ``min_duration_s`` and answered its
    minimum count (``min_examples`` examples offline, ``min_queries`` requests single-stream),
    or until ``max_duration_s`` cuts it short (the run then says its minimums were not met).
    Memory is sampled every ``sample_interval_s`` throughout the run."""

    warmup_batches: int = 2
    min_examples: int = 256
    sample_interval_s: float = 0.05
    min_queries: int = 64
    min_duration_s: float = 0.5
    max_duration_s: float = 60.0
    repeats: int = 3

    def __post_init__(self) -> None:
        # The loader checks types and signs; these are the rules between fields and counts.
        for name in ("min_examples", "min_queries", "repeats"):
            if getattr(self, name) < 1:
                raise SpecValueError(name, "must be at least 1")
        if self.warmup_batches < 0:
            raise SpecValueError("warmup_batches", "must be >= 0")
        for name in ("sample_interval_s", "min_duration_s"):
            if not getattr(self, name) > 0:
                raise SpecValueError(name, "must be > 0")
        if not self.max_duration_s >= self.min_duration_s:
            raise SpecValueError("max_duration_s", "must be >= min_duration_s")


@dataclass(frozen=True)
class BootstrapSpec:
    """Bootstrap confidence interval settings."""

    n_resamples: int = 1000
    seed: int = 0


@dataclass(frozen=True)
class QuotaSpec:
    """How many submissions one user may make to a task: per UTC day and in total (None:
    no limit). Only what the submitter caused counts (see usecases/quotas.py)."""

    per_day: int | None = 10
    total: int | None = None


@dataclass(frozen=True)
class TaskSpec:
    """Everything the platform knows about a task; the source of truth for fields and labels."""

    name: str
    version: int
    description: str
    input_fields: tuple[str, ...]
    output_type: str  # a registered output type (metrics.outputs): label, answer, translation
    labels: tuple[str, ...]
    metric: str
    rounds: tuple[RoundSpec, ...]
    robustness: tuple[PerturbationSpec, ...]
    fairness: tuple[PerturbationSpec, ...]
    slices: tuple[str, ...]
    weights: Mapping[str, float]
    limits: Limits
    instance_memory_gib: float
    batch_size: int
    perturb_fields: tuple[str, ...]
    profiling: ProfilingSpec
    bootstrap: BootstrapSpec
    min_slice_size: int
    source: str = ""
    quotas: QuotaSpec = QuotaSpec()
    publish_results: bool = False  # a submission's results are public once scored, by default
    # The JSON key a model answers with and rows hold gold under; the loader sets it from the
    # output type (or the task's ``output.key``). Empty: the key named like the type.
    output_field: str = ""
    # The input fields that carry an image (base64 PNG or JPEG); every other field is text.
    image_fields: tuple[str, ...] = ()
    # The task's own threshold for its output type's fooled rule (None: the type's default)
    fooled_threshold: float | None = None

    @property
    def unmeasured_axes(self) -> tuple[str, ...]:
        """The perturbation axes the task measures no model on (it lists no perturbation
        for them): a board leaves them out of every Dynascore instead of unranking all."""
        axes = {"robustness": self.robustness, "fairness": self.fairness}
        return tuple(axis for axis, listed in axes.items() if not listed)

    @property
    def text_fields(self) -> tuple[str, ...]:
        """The input fields that carry text."""
        return tuple(f for f in self.input_fields if f not in self.image_fields)

    def field_kind(self, field: str) -> str:
        """'image' or 'text'."""
        return "image" if field in self.image_fields else "text"

    def fields_to_perturb(self, kind: str, every_field: bool) -> tuple[str, ...]:
        """The fields a perturbation of ``kind`` changes: the task's ``perturb_fields`` of
        that kind, or every input field of it for a term swap (``every_field``), which must
        change a name alike wherever it occurs."""
        fields = self.input_fields if every_field else self.perturb_fields
        return tuple(f for f in fields if self.field_kind(f) == kind)

    @property
    def output_key(self) -> str:
        """The JSON key a model answers with (e.g. 'label', 'answer', 'targetText')."""
        return self.output_field or self.output_type

    def round(self, name: str) -> RoundSpec:
        """The round called ``name``."""
        for spec in self.rounds:
            if spec.name == name:
                return spec
        raise KeyError(f"task {self.name!r} has no round {name!r}")

    def public_dict(self) -> dict[str, Any]:
        """What a submitter may see: fields, labels, rounds, limits, weights."""
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "input_fields": list(self.input_fields),
            "image_fields": list(self.image_fields),
            "output": {
                "type": self.output_type,
                "key": self.output_key,
                "labels": list(self.labels),
                "fooled_threshold": self.fooled_threshold,  # null: the type's default
            },
            "metric": self.metric,
            "rounds": [
                {
                    "name": r.name,
                    "weight": r.weight,
                    "datasets": [d.name for d in r.datasets],
                    "public": [d.name for d in r.datasets if d.public],
                }
                for r in self.rounds
            ],
            "perturbations": {
                "robustness": [dataclasses.asdict(p) for p in self.robustness],
                "fairness": [dataclasses.asdict(p) for p in self.fairness],
            },
            "slices": list(self.slices),
            "weights": dict(self.weights),
            "limits": dataclasses.asdict(self.limits),
            "instance_memory_gib": self.instance_memory_gib,
            "batch_size": self.batch_size,
        }
