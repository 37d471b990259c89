"""vMER against a hand-computed case, and its edges (nothing submitted, nothing settled)."""

from __future__ import annotations

import pytest

from metrics.vmer import CollectedOutcome, Group, Tally, per_example, vmer_report


def _human(
    n: int, writer: str, model: str, fooled: bool | None, verdict: str | None
) -> CollectedOutcome:
    return CollectedOutcome(f"h{n}", "human", writer, model, fooled, verdict)


# Ten human examples by three writers over two models, and two machine proposals (M1 fooled
# both models and counts once per model but once in the round).
OUTCOMES = [
    _human(1, "w1", "A", True, "correct"),
    _human(2, "w1", "A", True, "incorrect"),
    _human(3, "w1", "B", False, None),
    _human(4, "w1", "B", True, None),
    _human(5, "w2", "A", True, "correct"),
    _human(6, "w2", "B", True, "flagged"),
    _human(7, "w2", "B", None, None),
    _human(8, "w3", "A", False, None),
    _human(9, "w3", "A", True, "correct"),
    _human(10, "w3", "B", True, "correct"),
    CollectedOutcome("m1", "machine", None, "A", True, "correct"),
    CollectedOutcome("m1", "machine", None, "B", True, "correct"),
    CollectedOutcome("m2", "machine", None, "A", True, "incorrect"),
]


def _table(groups: tuple[Group, ...]) -> dict[tuple[str, str | None], Tally]:
    return {(g.origin, g.key): g.tally for g in groups}


def test_the_hand_computed_case() -> None:
    """Human, the round: 10 submitted; fooled 1,2,4,5,6,9,10 = 7; judged incorrect or
    flagged 2,6 = 2; correct 1,5,9,10 = 4; unsettled fooled 4 = 1; unanswered 7 = 1.
    9 answered (the unanswered one stays out of the rates): vMER = 4/9 (= (7 - 2 - 1
    unvalidated) / 9); MER = 7/9.
    Model A (1,2,5,8,9): 5 submitted, fooled 4, rejected 1, correct 3 -> 3/5 = 0.6.
    Model B (3,4,6,7,10): 5 submitted, fooled 3, rejected 1, correct 1, unvalidated 1,
    unanswered 1 -> 1/4 = 0.25.
    Writers: w1 (1-4) 1/4 = 0.25, unvalidated 1; w2 (5-7) 1/2, unanswered 1; w3 (8-10) 2/3.
    Machine: the round 2 submitted, 1 correct, 1 incorrect -> 0.5; model A (m1, m2) 1/2,
    model B (m1) 1/1; the machine writer 1/2."""
    report = vmer_report(OUTCOMES)
    rounds = _table(report.round)
    assert rounds[("human", None)] == Tally(10, 7, 2, 4, 1, 1)
    assert rounds[("human", None)].vmer == pytest.approx(4 / 9)
    assert rounds[("human", None)].mer == pytest.approx(7 / 9)
    assert rounds[("machine", None)] == Tally(2, 2, 1, 1, 0, 0)
    assert rounds[("machine", None)].vmer == pytest.approx(0.5)

    models = _table(report.models)
    assert models[("human", "A")] == Tally(5, 4, 1, 3, 0, 0)
    assert models[("human", "B")] == Tally(5, 3, 1, 1, 1, 1)
    assert models[("human", "A")].vmer == pytest.approx(0.6)
    assert models[("human", "B")].vmer == pytest.approx(0.25)
    assert models[("machine", "A")].vmer == pytest.approx(0.5)
    assert models[("machine", "B")].vmer == pytest.approx(1.0)

    writers = report.writers
    assert [(g.origin, g.key) for g in writers] == [
        ("human", "w3"), ("human", "w2"), ("human", "w1"), ("machine", None),
    ]  # fmt: skip
    assert [g.tally.vmer for g in writers] == pytest.approx([2 / 3, 0.5, 0.25, 0.5])
    assert _table(writers)[("human", "w1")].unvalidated_fooled == 1
    assert _table(writers)[("human", "w2")].unanswered == 1


def test_unvalidated_fooled_examples_never_count_as_validated() -> None:
    pending = [_human(n, "w", "A", True, None) for n in range(3)]
    tally = _table(vmer_report(pending).round)[("human", None)]
    assert tally == Tally(submitted=3, fooled=3, unvalidated_fooled=3)
    assert tally.vmer == 0.0
    assert tally.mer == 1.0


def test_nothing_submitted_gives_no_rate() -> None:
    report = vmer_report([])
    assert [(g.origin, g.tally.vmer, g.tally.mer) for g in report.round] == [
        ("human", None, None),
        ("machine", None, None),
    ]
    assert report.models == () and report.writers == ()


def test_a_proposal_counts_once_per_example() -> None:
    both = [
        CollectedOutcome("x", "machine", None, "A", None, None),
        CollectedOutcome("x", "machine", None, "B", False, None),
        CollectedOutcome("y", "machine", None, "A", False, None),
        CollectedOutcome("y", "machine", None, "B", True, "correct"),
    ]
    merged = {o.example_id: o.fooled for o in per_example(both)}
    assert merged == {"x": False, "y": True}
