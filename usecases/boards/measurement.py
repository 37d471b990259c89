"""Warnings for a leaderboard that ranks speed and memory measured under different conditions.

Every result since measurement conditions were recorded carries their fingerprint (see
``evaluator.conditions``) in its summary; older results have none and count as one
*unknown* group. A board whose ranked models fall in more than one group gets a
``mixed_conditions`` warning naming the groups, and one whose throughput figures mix
offline (batched) and single-stream measurements gets ``mixed_throughput_modes``.
"""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from configs.vocabulary.boards import BoardWarning

UNKNOWN = "unknown"
UNKNOWN_LABEL = "unknown: measured before conditions were recorded"
OFFLINE, SINGLE_STREAM = "offline", "single_stream"


def fingerprint(row: Mapping[str, Any]) -> str:
    """A result row's conditions fingerprint, or ``unknown`` when it has none."""
    conditions = row.get("conditions")
    if isinstance(conditions, Mapping) and isinstance(conditions.get("fingerprint"), str):
        return str(conditions["fingerprint"])
    return UNKNOWN


def throughput_mode(row: Mapping[str, Any]) -> str:
    """How the row's throughput was measured; results older than the field were measured
    in batches of the task's size, which is the offline pass."""
    mode = row.get("throughput_mode")
    return mode if mode in (OFFLINE, SINGLE_STREAM) else OFFLINE


def condition_groups(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One group per fingerprint among ``rows``, largest first (ties by fingerprint): its
    ``fingerprint``, ``letter`` (A, B, ... for pages), ``label``, ``models`` (how many)
    and ``conditions`` (the comparable fields, null when unknown)."""
    counts = Counter(fingerprint(row) for row in rows)
    sample: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        sample.setdefault(fingerprint(row), row.get("conditions") or {})
    ordered = sorted(counts, key=lambda key: (-counts[key], key == UNKNOWN, key))
    return [
        {
            "fingerprint": key,
            "letter": _letter(index),
            "label": UNKNOWN_LABEL if key == UNKNOWN else str(sample[key].get("label") or key),
            "models": counts[key],
            "conditions": None if key == UNKNOWN else sample[key].get("comparable"),
        }
        for index, key in enumerate(ordered)
    ]


def warnings_for(rows: Sequence[Mapping[str, Any]]) -> list[BoardWarning]:
    """The board's warnings over its ranked ``rows`` (empty when they compare fairly)."""
    found: list[BoardWarning] = []
    groups = condition_groups(rows)
    if len(groups) > 1:
        found.append(_mixed_conditions(groups))
    modes = Counter(throughput_mode(row) for row in rows)
    if len(modes) > 1:
        found.append(
            {
                "code": "mixed_throughput_modes",
                "message": (
                    f"Throughput mixes {modes[OFFLINE]} offline (batched) and "
                    f"{modes[SINGLE_STREAM]} single-stream measurements: a model served one "
                    "example per request cannot be batched, so its examples/s is a "
                    "single-stream figure and is not comparable with batched ones."
                ),
                "modes": dict(sorted(modes.items())),
            }
        )
    return found


def _mixed_conditions(groups: list[dict[str, Any]]) -> BoardWarning:
    unknown = sum(g["models"] for g in groups if g["fingerprint"] == UNKNOWN)
    message = (
        f"The ranked models were measured under {len(groups)} different conditions: "
        "throughput and memory compare fairly only within a group."
    )
    if unknown:
        message += (
            f" {unknown} model{'s were' if unknown != 1 else ' was'} measured before "
            "conditions were recorded (unknown); re-evaluate to record them."
        )
    return {
        "code": "mixed_conditions",
        "message": message,
        "groups": groups,
        "differs_in": _differing(g["conditions"] for g in groups if g["conditions"]),
    }


def _differing(known: Iterable[Mapping[str, Any]]) -> list[str]:
    """The comparable fields whose values differ among the known groups."""
    seen: dict[str, set[str]] = {}
    for fields in known:
        for key, value in fields.items():
            seen.setdefault(key, set()).add(repr(value))
    return sorted(key for key, values in seen.items() if len(values) > 1)


def _letter(index: int) -> str:
    """A, B, ..., Z, AA, AB, ...: short group names for the page."""
    letters = string.ascii_uppercase
    name = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        name = letters[rest] + name
    return name
