"""The page's tie notes: small groups name every other member; big ones name the nearest
few by rank and count the rest, so a board of a thousand tied models stays small."""

from __future__ import annotations

from typing import Any

from api.pages.site import TIE_NAMES_SHOWN, _ties


def board(n: int, groups: list[list[int]]) -> dict[str, Any]:
    return {
        "models": [{"model_id": f"id{i}", "name": f"m{i}"} for i in range(n)],
        "tie_groups": [{"model_ids": [f"id{i}" for i in group]} for group in groups],
    }


def test_a_small_group_names_every_other_member_and_singletons_have_no_note() -> None:
    notes = _ties(board(3, [[0, 1], [2]]))
    assert notes == {
        "id0": "statistically tied (95 %) with m1",
        "id1": "statistically tied (95 %) with m0",
    }


def test_a_big_group_names_the_nearest_and_counts_the_rest() -> None:
    notes = _ties(board(6, [list(range(6))]))
    assert notes["id0"] == "statistically tied (95 %) with m1, m2, m3 and 2 more in its group"
    assert notes["id3"] == "statistically tied (95 %) with m2, m4, m5 and 2 more in its group"
    assert notes["id5"] == "statistically tied (95 %) with m2, m3, m4 and 2 more in its group"


def test_the_notes_grow_linearly_with_the_group() -> None:
    sizes = [len("".join(_ties(board(n, [list(range(n))])).values())) for n in (100, 1000)]
    assert sizes[1] < 11 * sizes[0]  # quadratic notes would be ~100 times longer
    assert all(
        note.count(", ") == TIE_NAMES_SHOWN - 1
        for note in _ties(board(50, [list(range(50))])).values()
    )
