"""The leaderboard as the pages show it: the API's computation (``usecases.boards.leaderboard``) on
rows re-weighted per round, plus the raw rows the page's script re-ranks in the browser.

Round weights are a page option the JSON API does not take: with the task's own round
weights the rows are used exactly as stored (so the page equals ``GET .../leaderboard``);
other weights recompute performance, robustness and fairness as the round-weighted mean
the evaluator uses (``evaluator.scoring.rollup``), throughput and memory being measured
once per model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from configs.schema import TaskSpec
from configs.vocabulary.axes import AXES
from configs.vocabulary.numbers import WEIGHT_RULE, NotAWeight, parse_weight
from configs.vocabulary.results import BoardRow, RoundRow
from dynascore.weights import Weights
from metrics.outputs import get_output_type
from usecases.boards.leaderboard import (
    viewer_weights,
)

RoundAxis = Literal["performance", "robustness", "fairness"]
ROUND_AXES: tuple[RoundAxis, ...] = ("performance", "robustness", "fairness")
TOLERANCE = 1e-4  # dynascore.amrs's default, used by the API


class BadWeights(ValueError):
    """A weights or rounds query the page cannot use (the sentence says why)."""


# metric names as pages show them (the page's script reads them from its data)
METRIC_LABELS = {
    "bleu": "BLEU",
    "spbleu": "spBLEU",
    "chrf": "chrF++",
    "exact_match": "Exact match",
    "squad_f1": "F1",
    "vqa_accuracy": "VQA accuracy",
    "accuracy": "Accuracy",
    "macro_f1": "Macro F1",
}


def secondary_metrics(task: TaskSpec) -> tuple[str, ...]:
    """The metrics a board shows beside the task's own (BLEU beside chrF++)."""
    return get_output_type(task.output_type).secondary_metrics(task.metric)


def default_round_weights(task: TaskSpec) -> dict[str, float]:
    return {spec.name: float(spec.weight) for spec in task.rounds}


def parse_round_weights(task: TaskSpec, text: str | None) -> dict[str, float]:
    """``"r1:1,r2:0"``: the task's round weights, overridden by the rounds named."""
    weights = default_round_weights(task)
    if not text:
        return weights
    named: set[str] = set()
    items = [part.strip(" ") for part in text.split(",")]
    if "" in items:
        raise BadWeights(f"a round weight is missing between commas in {text[:80]!r}.")
    for item in items:
        name, sep, raw = (piece.strip(" ") for piece in item.partition(":"))
        if not sep:
            raise BadWeights(f"round weight {item!r} is not of the form round:number.")
        if name not in weights:
            raise BadWeights(f"the task has no round {name!r} (rounds: {', '.join(weights)}).")
        if name in named:
            raise BadWeights(f"the weight of round {name!r} is given twice.")
        try:
            value = parse_weight(raw)
        except NotAWeight as exc:
            if exc.negative:
                raise BadWeights(
                    f"the weight of round {name!r} must be a finite number >= 0."
                ) from None
            raise BadWeights(
                f"the weight of round {name!r} must be {WEIGHT_RULE}, not {raw[:40]!r}."
            ) from None
        if not math.isfinite(value) or value < 0:
            raise BadWeights(f"the weight of round {name!r} must be a finite number >= 0.")
        named.add(name)
        weights[name] = value
    if not any(weights.values()):
        raise BadWeights("at least one round weight must be greater than 0.")
    return weights


def requested_round_weights(
    task: TaskSpec,
    view_rounds: Mapping[str, float] | None,
    rounds_text: str | None,
    weights_text: str | None,
) -> dict[str, float]:
    """The round weights a board request means, alike on the page, the JSON leaderboard and
    the download: the default view's (``view_rounds``) when the request names neither
    rounds nor weights, else the task's overridden by the rounds it names (BadWeights)."""
    if view_rounds is not None and not (rounds_text or weights_text):
        return dict(view_rounds)
    return parse_round_weights(task, rounds_text)


def axis_weights(task: TaskSpec, text: str | None) -> Weights:
    """The viewer's axis weights exactly as the API reads them."""
    try:
        return viewer_weights(task, text)
    except ValueError as exc:
        raise BadWeights(str(exc)) from None


def weights_text(weights: Mapping[str, float]) -> str:
    """``axis:number,...`` in a stable order, numbers without a needless ``.0``."""
    return ",".join(f"{name}:{_number(value)}" for name, value in weights.items())


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _weighted_mean(pairs: list[tuple[Any, float]]) -> float | None:
    """The evaluator's round roll-up: rounds without a value or weight are skipped. The
    weights are scaled by their largest first, so huge ones (1e307) cannot overflow."""
    kept = [(value, weight) for value, weight in pairs if _finite(value) and weight > 0]
    top = max((weight for _, weight in kept), default=0.0)
    kept = [(value, weight / top) for value, weight in kept]
    total = sum(weight for _, weight in kept)
    return sum(value * weight for value, weight in kept) / total if total else None


def in_task_order(task: TaskSpec, round_weights: Mapping[str, float]) -> dict[str, float]:
    """``round_weights`` listed in the task's round order (rounds it does not have last)."""
    known = [spec.name for spec in task.rounds if spec.name in round_weights]
    others = sorted(set(round_weights) - set(known))
    return {name: round_weights[name] for name in [*known, *others]}


def reweighted(
    rows: Sequence[BoardRow], round_weights: Mapping[str, float], task: TaskSpec
) -> list[BoardRow]:
    """Rows whose round-based axes are the mean of their rounds under ``round_weights``.

    Always recomputed from the per-round values: an owner may change a round's weight after
    its models were scored, and one board must not mix two bases. The stored performance
    interval is kept only for a result rolled up under these very weights. The rounds are
    summed in the task's order, whatever order ``round_weights`` lists them in: a float sum
    depends on its order, and a cached board serves every order alike."""
    round_weights = in_task_order(task, round_weights)
    wanted = {name: float(w) for name, w in round_weights.items() if w > 0}
    result = []
    none = RoundRow()
    for row in rows:
        by_round = {r.get("round"): r for r in row.get("rounds") or []}
        changed = row.copy()
        for axis in ROUND_AXES:
            if not any(axis in by_round.get(name, none) for name in round_weights):
                continue  # none of these rounds says it (a summary-only result): it stands
            changed[axis] = _weighted_mean(
                [(by_round.get(name, none).get(axis), w) for name, w in round_weights.items()]
            )
        if isinstance(row.get("secondary"), dict):
            changed["secondary"] = {
                metric: _weighted_mean(
                    [
                        ((by_round.get(name, none).get("secondary") or {}).get(metric), w)
                        for name, w in round_weights.items()
                    ]
                )  # fmt: skip
                for metric in row["secondary"]
            }
        if not _rolled_up_alike(row, by_round, wanted, changed):
            changed["performance_ci"] = None  # the stored interval is for other weights
            if isinstance(row.get("secondary_ci"), dict):
                changed["secondary_ci"] = dict.fromkeys(row["secondary_ci"])
        result.append(changed)
    return result


def _proportional(weights: Mapping[str, float]) -> dict[str, float]:
    """Weights as shares of their largest, rounded: only their proportions matter."""
    top = max(weights.values(), default=0.0)
    return {k: round(v / top, 12) for k, v in weights.items()} if top > 0 else {}


def _rolled_up_alike(
    row: Mapping[str, Any],
    by_round: Mapping[Any, Mapping[str, Any]],
    wanted: Mapping[str, float],
    changed: Mapping[str, Any],
) -> bool:
    """Whether the stored roll-up used ``wanted``: by the weights each round records, or
    (results from before rounds recorded them) by giving the stored value back exactly."""
    if by_round and all("weight" in r for r in by_round.values()):
        used = {str(n): float(r["weight"]) for n, r in by_round.items() if r["weight"] > 0}
        return _proportional(used) == _proportional(wanted)  # r1:2,r2:2 is r1:1,r2:1
    stored, recomputed = row.get("performance"), changed.get("performance")
    if isinstance(stored, int | float) and isinstance(recomputed, int | float):
        return _finite(stored) and _finite(recomputed) and abs(stored - recomputed) < 1e-9
    return False


def defined(result: Mapping[str, Any], weights: Weights) -> tuple[bool, str]:
    """Whether the Dynascores mean anything, and if not, the sentence saying why."""
    models = result.get("models") or []
    if not models:
        return False, "No model has a complete result yet."
    performances = [m["performance"] for m in models]
    threshold = TOLERANCE * abs(max(performances))  # dynascore.amrs keeps these pairs
    ordered = sorted(performances)
    distinct = any(b - a > threshold for a, b in zip(ordered, ordered[1:], strict=False))
    if not distinct:
        return False, (
            "The Dynascore is undefined: it needs at least two models whose performance "
            "differs, and this leaderboard has "
            + ("only one model." if len(models) == 1 else "none that differ.")
        )
    amrs = result.get("amrs") or {}
    usable = [a for a in AXES if weights.values[a] > 0 and (amrs.get(a) or 0) > 0]
    if not usable:
        return False, (
            "The Dynascore is undefined for these weights: every weighted axis is the same "
            "for all models. Give another axis a weight."
        )
    return True, ""


def condition_marks(result: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Fingerprint -> the group's letter and label, from the board's ``mixed_conditions``
    warning (empty when every ranked model was measured alike: no marks then)."""
    for warning in result.get("warnings") or []:
        if warning.get("code") == "mixed_conditions":
            return {
                g["fingerprint"]: {"letter": g["letter"], "label": g["label"]}
                for g in warning.get("groups") or []
            }
    return {}


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
