"""A leaderboard as the use cases hand it to the API, the pages, the CLI and snapshots: the
JSON ``GET /api/v1/tasks/<task>/leaderboard`` answers (field meanings:
``api.schemas_board.LeaderboardSchema``; the tie and flip fields: ``dynascore.stability``).
Key order is the JSON's: each is built in the order declared here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict

from configs.vocabulary.results import ImageGone


class RoundEntry(TypedDict):
    """A model's performance on one round, with its interval over the round's sets."""

    round: str
    performance: float | None
    performance_ci: Sequence[float | None] | None


class BoardEntry(TypedDict):
    """One ranked model. Prepared once per board with ``rank``, ``dynascore``, ``score`` and
    the tie fields None; each page under a viewer's weights fills them in."""

    rank: int | None
    model_id: str
    name: str
    dynascore: float | None
    score: float | None  # the readable 0-100 scale of the Dynascore
    performance: float | None
    throughput: float | None
    memory: float | None
    robustness: float | None
    fairness: float | None
    memory_peak: float | None
    ranked_as: dict[str, float]  # throughput and memory as the ranking counts them
    units: dict[str, float | None]
    rounds: list[RoundEntry]
    performance_ci: Sequence[float | None] | None
    secondary: dict[str, float | None]
    secondary_ci: dict[str, Sequence[float | None] | None]
    tie_group: int | None
    dynascore_ci: list[float] | None
    rank_interval: list[int] | None
    partial: NotRequired[bool]  # with the task's data hashes known: scored on other data
    not_scored_on: NotRequired[list[str]]
    image_gone: ImageGone | None
    throughput_mode: str | None
    conditions: str  # the measurement's group (usecases.boards.measurement)


class UnrankedEntry(TypedDict):
    """A model left off the ranking, and why."""

    model_id: str
    name: str
    reason: str


class TieGroup(TypedDict):
    """Models a 95 % interval cannot order, as far as a page shows them."""

    group: int
    model_ids: list[str]
    rank_range: list[int]
    size: int


class FlipWeight(TypedDict):
    """The one-axis weight change that would swap two adjacent models (nulls when none)."""

    above: str
    below: str
    axis: str | None
    weight: float | None
    delta: float | None


class BoardWarning(TypedDict, total=False):
    """Why the board's numbers do not compare fairly (mixed conditions or throughput
    modes), or a weight that counts for nothing: ``code`` and ``message`` always, the
    rest by code."""

    code: str
    message: str
    axes: list[str]
    modes: dict[str, int]
    groups: list[dict[str, Any]]
    differs_in: list[str]


class Leaderboard(TypedDict):
    """A page of a task's board under one viewer's weights."""

    task: str
    metric: str
    weights: dict[str, float]
    instance_memory_gib: float
    amrs: dict[str, float | None]
    resolution: dict[str, dict[str, float | bool]]
    total_models: int
    offset: int
    limit: int | None
    models: list[BoardEntry]
    unranked: list[UnrankedEntry]
    rounds: list[str]
    tie_confidence: float
    tie_groups: list[TieGroup]
    flip_weight_range: list[float]
    flip_weights: list[FlipWeight]
    warnings: list[BoardWarning]


class PageBoard(Leaderboard):
    """The board a page's script starts from: the API's, with the round weights it is
    under and whether its Dynascore is defined."""

    round_weights: dict[str, float]
    dynascore_defined: bool
    undefined_reason: str  # empty when defined
