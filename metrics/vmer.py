"""Validated model error rate (vMER) of a collection round, per round, per model and per
writer, with human-written and machine-proposed examples apart.

vMER = validated fooled / answered, where *validated fooled* is an example that fooled
the model and was judged ``correct``, and *answered* counts the submitted examples a model
answered. Once every fooled example is settled this equals (fooled - fooled judged
incorrect or flagged) / answered; before then the fooled examples still waiting for a
verdict are counted in ``unvalidated_fooled`` and never in the numerator. An unanswered
example (the model timed out or crashed: ``fooled`` is None) could neither fool nor be
resisted: it counts in ``submitted`` and ``unanswered``, never in a rate. ``mer`` is the
raw model error rate, fooled / answered, validated or not.

A machine proposal that fooled several models arrives as one outcome per model: it counts
once per model in the model table, and once in the round and writer tables."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

HUMAN, MACHINE = "human", "machine"
ORIGINS = (HUMAN, MACHINE)
CORRECT, INCORRECT, FLAGGED = "correct", "incorrect", "flagged"
VERDICTS = (CORRECT, INCORRECT, FLAGGED)
REJECTED = frozenset({INCORRECT, FLAGGED})


@dataclass(frozen=True)
class CollectedOutcome:
    """One example's outcome against one model, and its verdict (None: not settled)."""

    example_id: str
    origin: str
    author_id: str | None
    model_id: str | None
    fooled: bool | None
    verdict: str | None


@dataclass(frozen=True)
class Tally:
    """Counts of one group of examples, and the rates they give."""

    submitted: int = 0
    fooled: int = 0
    rejected_fooled: int = 0  # fooled, judged incorrect or flagged
    validated_fooled: int = 0  # fooled, judged correct
    unvalidated_fooled: int = 0  # fooled, no verdict yet
    unanswered: int = 0  # the model gave no answer (in submitted, never in the rates)

    @property
    def answered(self) -> int:
        """Examples a model answered: the rates' denominator (a model that could not answer
        was neither fooled nor right, so it must not dilute the rate)."""
        return self.submitted - self.unanswered

    @property
    def vmer(self) -> float | None:
        return _ratio(self.validated_fooled, self.answered)

    @property
    def mer(self) -> float | None:
        return _ratio(self.fooled, self.answered)

    def add(self, outcome: CollectedOutcome) -> Tally:
        """This tally with ``outcome`` counted."""
        fooled = outcome.fooled is True
        return Tally(
            submitted=self.submitted + 1,
            fooled=self.fooled + fooled,
            rejected_fooled=self.rejected_fooled + (fooled and outcome.verdict in REJECTED),
            validated_fooled=self.validated_fooled + (fooled and outcome.verdict == CORRECT),
            unvalidated_fooled=self.unvalidated_fooled + (fooled and outcome.verdict is None),
            unanswered=self.unanswered + (outcome.fooled is None),
        )


@dataclass(frozen=True)
class Group:
    """A tally for one origin and one key (a model id or a writer id; None for the round,
    and for a writer of machine proposals)."""

    origin: str
    key: str | None
    tally: Tally


@dataclass(frozen=True)
class VmerReport:
    """The round per origin (both always present), and per model and per writer."""

    round: tuple[Group, ...]
    models: tuple[Group, ...]
    writers: tuple[Group, ...]


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def per_example(outcomes: Iterable[CollectedOutcome]) -> list[CollectedOutcome]:
    """One outcome per example: fooled if it fooled any model, unanswered only if no model
    answered (a multi-model machine proposal counts once)."""
    merged: dict[str, CollectedOutcome] = {}
    for outcome in outcomes:
        seen = merged.get(outcome.example_id)
        if seen is None or _rank(outcome.fooled) > _rank(seen.fooled):
            merged[outcome.example_id] = outcome
    return list(merged.values())


def _rank(fooled: bool | None) -> int:
    """Fooled beats answered-not-fooled beats unanswered."""
    return {None: 0, False: 1, True: 2}[fooled]


def _grouped(
    outcomes: Iterable[CollectedOutcome], key: Callable[[CollectedOutcome], str | None]
) -> dict[tuple[str, str | None], Tally]:
    tallies: dict[tuple[str, str | None], Tally] = {}
    for outcome in outcomes:
        slot = (outcome.origin, key(outcome))
        tallies[slot] = tallies.get(slot, Tally()).add(outcome)
    return tallies


def _ordered(tallies: dict[tuple[str, str | None], Tally]) -> tuple[Group, ...]:
    """Human first, then the highest vMER, the most submitted, the key."""

    def rank(item: tuple[tuple[str, str | None], Tally]) -> tuple[Hashable, ...]:
        (origin, key), tally = item
        order = ORIGINS.index(origin) if origin in ORIGINS else len(ORIGINS)
        vmer = tally.vmer if tally.vmer is not None else -1.0
        return (order, origin, -vmer, -tally.submitted, key or "")

    return tuple(Group(o, k, t) for (o, k), t in sorted(tallies.items(), key=rank))


def vmer_report(outcomes: Iterable[CollectedOutcome]) -> VmerReport:
    """vMER of a round's outcomes, per round, model and writer, origins apart."""
    every = list(outcomes)
    examples = per_example(every)
    rounds = {(origin, None): Tally() for origin in ORIGINS} | _grouped(examples, lambda o: None)
    answered_by_model = [o for o in every if o.model_id is not None]
    return VmerReport(
        round=_ordered(rounds),
        models=_ordered(_grouped(answered_by_model, lambda o: o.model_id)),
        writers=_ordered(_grouped(examples, lambda o: o.author_id)),
    )
