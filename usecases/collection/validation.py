"""Validating collected examples: a validator's vote, an owner's settlement, and the
round's validated model error rate (vMER) per origin, model and writer. Who may see the
example or settle it is the caller's check; the store refuses an author's own vote and a
second vote."""

from __future__ import annotations

from typing import Any

from metrics.vmer import Group, vmer_report
from store.validation import CollectionRound, Settlement, Validation
from usecases.service import Service


def vote(svc: Service, example_id: str, voter: str, verdict: str) -> Settlement:
    """``voter``'s verdict on the example (settles it once enough votes agree)."""
    return Validation(svc.db, svc.clock).vote(example_id, voter, verdict)


def settle(svc: Service, example_id: str, settler: str, verdict: str) -> Settlement:
    """The task owner's (or an admin's) final verdict, without votes."""
    return Validation(svc.db, svc.clock).settle(example_id, settler, verdict)


def _counts(group: Group) -> dict[str, Any]:
    tally = group.tally
    return {
        "origin": group.origin,
        "submitted": tally.submitted,
        "fooled": tally.fooled,
        "rejected_fooled": tally.rejected_fooled,
        "validated_fooled": tally.validated_fooled,
        "unvalidated_fooled": tally.unvalidated_fooled,
        "unanswered": tally.unanswered,
        "vmer": tally.vmer,
        "mer": tally.mer,
    }


def vmer_of(svc: Service, found: CollectionRound) -> dict[str, Any]:
    """The round's vMER as the API and the round page show it: aggregates and names only."""
    store = Validation(svc.db, svc.clock)
    report = vmer_report(store.outcomes(found.task, found.round))
    models = store.model_names({g.key for g in report.models if g.key is not None})
    writers = store.user_names({g.key for g in report.writers if g.key is not None})
    return {
        "task": found.task,
        "round": found.round,
        "status": found.status,
        "votes_needed": found.votes_needed,
        "totals": [_counts(g) for g in report.round],
        "models": [
            {**_counts(g), "model_id": g.key, "model_name": models.get(g.key or "")}
            for g in report.models
        ],
        "writers": [
            {**_counts(g), "writer": writers.get(g.key) if g.key is not None else None}
            for g in report.writers
        ],
    }
