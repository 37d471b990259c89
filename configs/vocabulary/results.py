"""Results of one evaluation: every number carries its full key (states, frozen)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from configs.vocabulary.failures import FailureCode

ORIGINAL = "original"
POOLED = "pooled:"  # variant prefix of an axis pooled over its perturbations


def pooled_variant(axis: str) -> str:
    """The variant name of an axis pooled over all its perturbations (never a perturbation's
    own name: a perturbation may be called like its axis, e.g. "fairness")."""
    return POOLED + axis


@dataclass(frozen=True)
class ScoreKey:
    """Everything that identifies a number; also the database's unique constraint.

    ``variant`` is ``original`` or a perturbation name (with its version and seed);
    ``slice`` is empty or ``column=group``; ``dataset_hash`` pins the exact rows scored.
    """

    task: str
    round: str
    dataset: str
    dataset_hash: str
    variant: str = ORIGINAL
    variant_version: str = ""
    seed: int = 0
    slice: str = ""
    metric: str = ""


@dataclass(frozen=True)
class Score:
    """One number with its key, the examples behind it and, where computed, a 95 % interval."""

    key: ScoreKey
    value: float | None
    n: int
    ci_low: float | None = None
    ci_high: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self.key), **{k: getattr(self, k) for k in SCORE_NUMBERS}}


SCORE_NUMBERS = ("value", "n", "ci_low", "ci_high")  # a Score's fields beside its key


@dataclass(frozen=True)
class Failure:
    """Why an evaluation failed: a code (which carries the blame), a sentence, and the last
    lines of the model's log."""

    code: FailureCode
    message: str
    log_tail: str = ""

    @property
    def user_caused(self) -> bool:
        """Whether the submitter caused it (platform faults are retried and never charged)."""
        return self.code.user_caused

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code.value,
            "message": self.message,
            "log_tail": self.log_tail,
            "user_caused": self.user_caused,
        }


class RoundRow(TypedDict, total=False):
    """One round of a result, as stored and shown: its performance (and interval over its
    sets), the robustness and fairness agreements with their example counts, each
    perturbation's agreement and performance, and the metrics beside the task's own."""

    round: str
    weight: float  # the round's weight when the result was rolled up
    performance: float | None
    performance_ci: Sequence[float | None] | None
    n: int
    datasets: list[str]
    robustness: float | None
    robustness_n: int
    fairness: float | None
    fairness_n: int
    variants: dict[str, float | None]
    variant_performance: dict[str, float | None]
    secondary: dict[str, float | None]
    secondary_ci: dict[str, Sequence[float | None] | None]


class SliceRow(TypedDict):
    """One slice column's report on one set, as stored and shown: the set, then fairlearn's
    per-group scores, group sizes and disparity (``metrics.slices.SliceReport``)."""

    round: str
    dataset: str
    column: str
    by_group: dict[str, float]
    sizes: dict[str, int]
    small_groups: list[str]
    difference: float
    ratio: float
    worst_group: str
    overall: float


class ImageGone(TypedDict):
    """When (ISO 8601 UTC) and why a model's image was removed (image retention)."""

    at: str | None
    reason: str


class BoardRow(TypedDict, total=False):
    """One model's newest result as a board reads it: who, the summary's axes (and what
    else the summary holds: the metric, intervals, measurement conditions), its rounds,
    and its image's and data's state."""

    model_id: str
    name: str
    performance: float | None
    robustness: float | None
    fairness: float | None
    throughput: float | None
    throughput_mode: str | None
    throughput_spread: float | None
    memory: float | None
    memory_peak: float | None
    metric: str
    performance_ci: Sequence[float | None] | None
    conditions: dict[str, Any] | None
    secondary: dict[str, float | None]
    secondary_ci: dict[str, Sequence[float | None] | None]
    rounds: list[RoundRow]
    image_id: str | None
    image_gone: ImageGone | None
    dataset_hashes: dict[str, str]


@dataclass
class EvaluationResult:
    """The outcome of evaluating one model on one task (all rounds, variants, profiling)."""

    task: str
    status: str  # "done" or "failed"
    summary: dict[str, Any] = field(default_factory=dict)
    rounds: list[RoundRow] = field(default_factory=list)
    scores: list[Score] = field(default_factory=list)
    slices: list[SliceRow] = field(default_factory=list)
    profile: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    failure: Failure | None = None

    def to_dict(self, *, include_scores: bool = True) -> dict[str, Any]:
        """JSON-ready: the summary axes at top level, then rounds, slices, profile, provenance."""
        data: dict[str, Any] = {"task": self.task, "status": self.status, **self.summary}
        data["rounds"] = self.rounds
        data["slices"] = self.slices
        data["profile"] = self.profile
        data["provenance"] = self.provenance
        data["failure"] = self.failure.to_dict() if self.failure else None
        if include_scores:
            data["scores"] = [score.to_dict() for score in self.scores]
        return data
