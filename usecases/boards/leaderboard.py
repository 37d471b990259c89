"""A task's leaderboard: the Dynascore over every model's newest result, re-weighted."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any, cast

import numpy as np
import pandas as pd

from configs.schema import TaskSpec
from configs.vocabulary.axes import AXES
from configs.vocabulary.boards import (
    BoardEntry,
    BoardWarning,
    FlipWeight,
    Leaderboard,
    TieGroup,
    UnrankedEntry,
)
from configs.vocabulary.numbers import check_weights_syntax
from configs.vocabulary.results import BoardRow
from dynascore.dynascore import (
    effective_weights,
    ranking_order,
    ranks,
    units_of,
    utilities,
    weighted_scores,
)
from dynascore.resolution import Resolution, board_resolutions, coarsen_utilities
from dynascore.stability import (
    CONFIDENCE,
    WEIGHT_RANGE,
    flip_weights,
    rank_intervals,
    tie_groups,
)
from dynascore.weights import Weights
from usecases.boards.measurement import fingerprint, warnings_for


def resolutions_of(rows: list[dict[str, Any]]) -> dict[str, Resolution]:
    """The board's measurement resolution per axis, from every row's throughput spread
    (weight-independent, so the page's script is sent the same numbers)."""
    return board_resolutions([finite_or_none(row.get("throughput_spread")) for row in rows])


def board_scores(scores: np.ndarray) -> np.ndarray:
    """The readable scale: 100 for the board's best Dynascore, 0 for its worst, linear in
    between (100 for all when they are equal). It moves only when the board's models or the
    weights change."""
    if scores.size == 0:
        return scores.copy()
    low, high = float(scores.min()), float(scores.max())
    if not high > low:
        return np.full(scores.shape, 100.0)
    result: np.ndarray = 100 * (scores - low) / (high - low)
    return result


def viewer_weights(task: TaskSpec, text: str | None) -> Weights:
    """The task's default weights, overridden by the axes the viewer names."""
    if not text:
        return Weights(dict(task.weights))
    parsed = Weights.parse(text)  # validates: unknown axis, not a number, negative
    check_weights_syntax(text)  # and the rest of the one rule every surface reads by
    named = {part.partition(":")[0].strip().lower() for part in text.split(",") if part.strip()}
    return Weights({**task.weights, **{axis: parsed.values[axis] for axis in named}})


def leaderboard(
    task: TaskSpec,
    rows: Sequence[BoardRow],
    weights: Weights,
    instance_memory_gib: float | None = None,
    current_hashes: dict[str, str] | None = None,
    *,
    offset: int = 0,
    limit: int | None = None,
) -> Leaderboard:
    """Ranked models with their axes, units and per-round breakdown, their tie groups at
    95 % and, per adjacent pair, the one-axis weight change that would swap it. With the
    task's ``current_hashes``, a model scored on other data is marked partial (it is
    re-scored). Field meanings: ``api.schemas_board.LeaderboardSchema``, ``dynascore.stability``.

    Linear in the number of models apart from the O(n log n) sort (a list-membership test
    here made it quadratic): :func:`prepare_board` then :meth:`PreparedBoard.render`."""
    board = prepare_board(task, rows, instance_memory_gib, current_hashes)
    return board.render(weights, offset=offset, limit=limit)


@dataclass(frozen=True)
class PreparedBoard:
    """Everything of a leaderboard that does not depend on the viewer's weights, for one
    read of the rows: entries without rank, Dynascore and tie fields, units and AMRS (they
    depend on the models and the instance memory only), performance intervals, unranked
    rows. ``render`` is the per-weights part: vectorised scoring, then one dict copy per
    model. A caller may keep a board while the rows do not change (e.g. keyed by a results
    version) and render it for every weights query; rendered boards share nested lists and
    dicts with the prepared one, so they are read-only."""

    task: TaskSpec
    instance_memory_gib: float
    ids: pd.Index
    performance: np.ndarray
    units: pd.DataFrame
    amrs: dict[str, float | None]
    entries: Sequence[BoardEntry]  # a list, or rows decoded as read (a kept board)
    performance_ci: pd.DataFrame
    unranked: list[UnrankedEntry]
    rates: pd.Series = field(repr=False)
    resolution: dict[str, Resolution] = field(default_factory=dict)
    warnings: list[BoardWarning] = field(default_factory=list)  # see usecases.boards.measurement
    # the rows it was prepared from, and what pages derive from them once per board
    source_rows: Sequence[dict[str, Any]] = field(default_factory=list, repr=False, compare=False)
    derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def render(self, weights: Weights, *, offset: int = 0, limit: int | None = None) -> Leaderboard:
        """The leaderboard JSON under ``weights``: the ranked models from ``offset``, at most
        ``limit`` of them (all without a limit), with the tie groups that touch that page and
        the flip weights of its adjacent pairs (the pair across the page's lower edge
        included). The scores and ranks are computed over every model, so a page's ranks
        are the full board's; only the per-model objects are built for the page alone."""
        ranked: list[BoardEntry] = []
        groups: list[TieGroup] = []
        flips: list[FlipWeight] = []
        total = len(self.ids)
        start = min(max(0, offset), total)
        stop = total if limit is None else min(total, start + max(0, limit))
        if total:
            ranking = self._ranking(weights)
            ranked, groups = self._ranked(ranking, start, stop)
            flips = _flips(_rows(ranking, start, min(total, stop + 1)), weights)
        return {
            "task": self.task.name,
            "metric": self.task.metric,
            "weights": weights.to_dict(),
            "instance_memory_gib": self.instance_memory_gib,
            "amrs": dict(self.amrs),
            "resolution": {axis: value.to_dict() for axis, value in self.resolution.items()},
            "total_models": total,
            "offset": start,
            "limit": limit,
            "models": ranked,
            "unranked": self.unranked,
            "rounds": [r.name for r in self.task.rounds],
            "tie_confidence": CONFIDENCE,
            "tie_groups": groups,
            "flip_weight_range": list(WEIGHT_RANGE),
            "flip_weights": flips,
            "warnings": self.warnings + _unmeasured_warnings(self.task, weights),
        }

    def _ranking(self, weights: Weights) -> pd.DataFrame:
        """What ``dynascore.compute`` returns, for the columns the stability figures read
        (the same functions compute the scores, ranks and order)."""
        shares = effective_weights(weights, self.rates)
        scores = weighted_scores(self.units, shares)
        order = ranking_order(scores, self.performance)
        columns = {f"{axis}_units": self.units[axis].to_numpy()[order] for axis in AXES}
        ranking = pd.DataFrame(
            {
                "position": order,
                "dynascore": scores[order],
                "score": board_scores(scores)[order],
                "rank": ranks(scores)[order],
                "performance": self.performance[order],
                **columns,
            },
            index=self.ids[order],
        )
        ranking.attrs = {"weights": shares}
        return ranking

    def _ranked(
        self, ranking: pd.DataFrame, start: int, stop: int
    ) -> tuple[list[BoardEntry], list[TieGroup]]:
        """The entries ranked ``start``..``stop`` with their rank, Dynascore and tie fields;
        the tie groups those entries belong to (each whole)."""
        stable = tie_groups(ranking, self.performance_ci)  # over every model: groups chain
        group_all = stable["tie_group"].to_numpy()
        page = slice(start, stop)
        rank_of = ranking["rank"].to_numpy()[page].tolist()
        scores = [round(score, 6) for score in ranking["dynascore"].to_numpy()[page].tolist()]
        # 6 decimals like the Dynascore: a page rounding it again must not round it twice
        readable = [round(score, 6) for score in ranking["score"].to_numpy()[page].tolist()]
        group_of = group_all[page].tolist()
        bounds = np.column_stack([stable["dynascore_low"], stable["dynascore_high"]])[page]
        intervals = np.round(bounds, 6).tolist()
        static = [self.entries[at] for at in ranking["position"].to_numpy()[page].tolist()]
        known = stable["has_interval"].to_numpy()[page].tolist()
        best, worst = rank_intervals(stable["dynascore_low"], stable["dynascore_high"])
        rank_spans = np.column_stack([best, worst])[page].tolist()
        columns = zip(
            static, rank_of, scores, readable, group_of, intervals, known, rank_spans, strict=True
        )
        # {**entry, ...} keeps the key order: the keys are already there (zip of eight
        # gives mypy no types: the entry is a BoardEntry, the fields below its own)
        entries = [
            cast(
                BoardEntry,
                {
                    **entry,
                    "rank": r,
                    "dynascore": d,
                    "score": s,
                    "tie_group": g,
                    "dynascore_ci": ci if k else None,
                    "rank_interval": span if k else None,  # unknown without its own interval
                },
            )
            for entry, r, d, s, g, ci, k, span in columns
        ]
        if not entries:  # a page past the end
            return entries, []
        page_ids = ranking.index[page].tolist()
        return entries, _groups(page_ids, group_of, group_all, ranking["rank"].to_numpy())


def _unmeasured_warnings(task: TaskSpec, weights: Weights) -> list[BoardWarning]:
    """A weight on an axis the task measures no model on counts for nothing: say so."""
    weighed = [axis for axis in task.unmeasured_axes if weights.values.get(axis, 0) > 0]
    if not weighed:
        return []
    named = ", ".join(weighed)
    return [
        {
            "code": "unmeasured_axis",
            "message": f"This task measures no model on {named} (it lists no perturbation "
            f"for it): the weight given to {named} counts for nothing in these Dynascores.",
            "axes": weighed,
        }
    ]


def _rows(ranking: pd.DataFrame, start: int, stop: int) -> pd.DataFrame:
    """Rows ``start``..``stop`` of a ranking, keeping the weights it was computed with."""
    part = ranking.iloc[start:stop]
    part.attrs = dict(ranking.attrs)
    return part


def prepare_board(
    task: TaskSpec,
    board_rows: Sequence[BoardRow],
    instance_memory_gib: float | None = None,
    current_hashes: dict[str, str] | None = None,
) -> PreparedBoard:
    """The weight-independent part of ``task``'s leaderboard over ``board_rows`` (one per
    model, as ``Queries.leaderboard_rows`` returns them)."""
    memory = instance_memory_gib or task.instance_memory_gib
    # within, rows are read by axis name (a loop over AXES): plain mappings, not copied
    rows = cast(list[dict[str, Any]], list(board_rows))
    source_rows = rows
    unmeasured = task.unmeasured_axes
    if unmeasured:  # the same 0 for every model: no rate of substitution, so left out
        rows = [{**row, **dict.fromkeys(unmeasured, 0.0)} for row in rows]
    values, complete, incomplete = _split(rows)
    ids = pd.Index([row["model_id"] for row in complete], dtype=object)
    table = pd.DataFrame(values, index=ids, columns=list(AXES))
    unranked: list[UnrankedEntry] = [
        {
            "model_id": row["model_id"],
            "name": row["name"],
            "reason": "missing axes: " + ", ".join(a for a in AXES if not _finite(row.get(a))),
        }
        for row in incomplete
    ]
    if not complete:
        empty = pd.DataFrame(columns=list(AXES), dtype=float)
        no_intervals = pd.DataFrame(columns=["low", "high"], dtype=float)
        return PreparedBoard(
            task, memory, ids, np.zeros(0), empty, {}, [], no_intervals, unranked,
            pd.Series(dtype=float), resolutions_of(rows), source_rows=source_rows,
        )  # fmt: skip
    resolution = resolutions_of(rows)
    coarse = coarsen_utilities(utilities(table, memory), resolution)  # checks the table
    units, rates = units_of(coarse)
    unit_rows = _nullable(units.to_numpy(dtype=float))
    ranked_throughput = coarse["throughput"].tolist()
    ranked_memory = (memory - coarse["memory"]).tolist()
    hashes = sorted(current_hashes.items()) if current_hashes is not None else []
    p, t, m, r, f = AXES
    entries: list[BoardEntry] = []
    for i, row in enumerate(complete):
        entry: dict[str, Any] = {  # axis keys by name: cast below, its keys held by a test
            "rank": None,
            "model_id": row["model_id"],
            "name": row["name"],
            "dynascore": None,
            "score": None,
            p: row[p],
            t: row[t],
            m: row[m],
            r: row[r],
            f: row[f],
            "memory_peak": row.get("memory_peak"),
            # the measured axes as the ranking counts them (within the board's resolution)
            "ranked_as": {t: ranked_throughput[i], m: ranked_memory[i]},
            "units": dict(zip(AXES, unit_rows[i], strict=True)),
            "rounds": [
                {
                    "round": one["round"],
                    "performance": one["performance"],
                    "performance_ci": one.get("performance_ci"),
                }
                for one in row.get("rounds", [])
            ],
            "performance_ci": row.get("performance_ci"),
            # the metrics the task's type reports beside its own (BLEU beside chrF++)
            "secondary": row.get("secondary") or {},
            "secondary_ci": row.get("secondary_ci") or {},
            "tie_group": None,
            "dynascore_ci": None,
            "rank_interval": None,
        }
        if current_hashes is not None:
            scored_on = row.get("dataset_hashes") or {}
            stale = (
                []
                if scored_on == current_hashes
                else [k for k, v in hashes if scored_on.get(k) != v]
            )
            entry["partial"] = bool(stale)
            entry["not_scored_on"] = stale
        for axis in unmeasured:  # shown as not measured, never as a 0
            entry[axis] = None
        entry["image_gone"] = row.get("image_gone")  # why a new round stays unscored
        entry["throughput_mode"] = row.get("throughput_mode")  # how throughput was measured
        entry["conditions"] = fingerprint(
            row
        )  # the measurement's group (usecases.boards.measurement)
        entries.append(cast(BoardEntry, entry))
    return PreparedBoard(
        task=task,
        instance_memory_gib=memory,
        ids=ids,
        performance=values[:, 0].copy(),
        units=units,
        amrs=_clean({axis: float(rates[axis]) for axis in AXES}),
        entries=entries,
        performance_ci=_performance_ci(complete, ids),
        unranked=unranked,
        rates=rates,
        resolution=resolution,
        warnings=warnings_for(complete),  # over every ranked model, whatever the page
        source_rows=source_rows,
    )


_NUMBERS = {int, float}


def _split(
    rows: list[dict[str, Any]],
) -> tuple[np.ndarray, list[dict[str, Any]], list[dict[str, Any]]]:
    """The axis matrix of the complete rows, the complete rows and the incomplete ones
    (an axis missing, None, not a number or not finite), each in the given order."""
    cells: list[Any] | None
    try:
        cells = list(map(itemgetter(*AXES), rows))
    except KeyError:  # a row lacks an axis: the slow path below sorts it out
        cells = None
    if cells is not None and set(map(type, chain.from_iterable(cells))) <= _NUMBERS:
        matrix = np.array(cells, dtype=float).reshape(len(rows), len(AXES))
        finite = np.isfinite(matrix).all(axis=1)
        if finite.all():
            return matrix, list(rows), []
        keep = finite.tolist()
        return (
            matrix[finite],
            [row for row, ok in zip(rows, keep, strict=True) if ok],
            [row for row, ok in zip(rows, keep, strict=True) if not ok],
        )
    complete: list[dict[str, Any]] = []
    incomplete: list[dict[str, Any]] = []
    for row in rows:
        (complete if all(_finite(row.get(axis)) for axis in AXES) else incomplete).append(row)
    matrix = np.array([[float(row[axis]) for axis in AXES] for row in complete], dtype=float)
    return matrix.reshape(len(complete), len(AXES)), complete, incomplete


def _groups(
    ids: list[str], group_of: list[int], group_all: np.ndarray, rank_all: np.ndarray
) -> list[TieGroup]:
    """One object per tie group on the page (``ids``, their ``group_of``), top first: its
    number, its models on the page, its whole rank range and size (``group_all`` and
    ``rank_all`` are over the whole ranking, where groups are contiguous runs)."""
    cuts = (np.flatnonzero(np.diff(np.asarray(group_of))) + 1).tolist()
    starts, ends = [0, *cuts], [*cuts, len(ids)]
    numbers = np.asarray([group_of[s] for s in starts], dtype=group_all.dtype)
    first = np.searchsorted(group_all, numbers, side="left").tolist()
    last = (np.searchsorted(group_all, numbers, side="right") - 1).tolist()
    return [
        {
            "group": group_of[s],
            "model_ids": ids[s:e],
            "rank_range": [int(rank_all[lo]), int(rank_all[hi])],
            "size": hi - lo + 1,
        }
        for s, e, lo, hi in zip(starts, ends, first, last, strict=True)
    ]


def _nullable(values: np.ndarray) -> list[Any]:
    """``values`` as nested Python lists, NaN and infinities as None."""
    cells = values.astype(object)
    cells[~np.isfinite(values)] = None
    result: list[Any] = cells.tolist()
    return result


def _performance_ci(rows: list[dict[str, Any]], index: pd.Index) -> pd.DataFrame:
    """Each row's overall performance interval as ``low``/``high`` (NaN when not known:
    missing, not two finite numbers, or low above high)."""
    given = [row.get("performance_ci") for row in rows]
    try:  # the usual case, every row has [low, high]: one conversion
        bounds = np.array(given, dtype=float).reshape(len(rows), 2)
    except (TypeError, ValueError):
        bounds = np.array([_interval(value) for value in given], dtype=float)
    bounds = bounds.reshape(len(rows), 2)
    bad = ~np.isfinite(bounds).all(axis=1) | (bounds[:, 0] > bounds[:, 1])
    bounds[bad] = np.nan
    return pd.DataFrame(bounds, index=index, columns=["low", "high"])


def _interval(value: Any) -> tuple[float, float]:
    if isinstance(value, list | tuple) and len(value) == 2 and all(map(_finite, value)):
        return float(value[0]), float(value[1])
    return math.nan, math.nan


def _flips(scored: pd.DataFrame, weights: Weights) -> list[FlipWeight]:
    """Per adjacent pair, the one-axis weight change that swaps it (nulls when none does)."""
    table = flip_weights(scored, weights)
    numbers = _nullable(table[["weight", "delta"]].to_numpy(dtype=float))
    return [
        {"above": above, "below": below, "axis": axis, "weight": pair[0], "delta": pair[1]}
        for above, below, axis, pair in zip(
            table["above"].tolist(),
            table["below"].tolist(),
            table["axis"].tolist(),
            numbers,
            strict=True,
        )  # fmt: skip
    ]


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def finite_or_none(value: Any) -> float | None:
    """A finite number as a float, anything else (None, NaN, text) as None."""
    return float(value) if _finite(value) else None


def _clean(values: Mapping[str, Any]) -> dict[str, float | None]:
    return {k: finite_or_none(v) for k, v in values.items()}
