"""A job's spec crosses from the store to the worker typed by the job's kind: a backfill's
scope, an adversary run's round, settings, models and seeds, or nothing."""

from __future__ import annotations

from typing import Any

import pytest

from configs.vocabulary.jobs import (
    AdversaryRun,
    BackfillScope,
    JobKind,
    Seed,
    UnreadableSpec,
    job_spec,
)
from store.adversary import AttackRuns
from store.db import Database
from store.jobs import JobStore

RUN = AdversaryRun(
    "r2",
    {"max_queries": 40, "operators": ["typo"]},
    ("m1", "m2"),
    (Seed({"text": "a fine film"}, {"label": "positive"}),),
)


@pytest.mark.parametrize(
    ("kind", "stored", "expected"),
    [
        (JobKind.EVALUATE, None, None),
        (JobKind.EVALUATE, {}, None),
        (
            JobKind.EVALUATE,
            {"scope": {"sets": [{"round": "r1", "dataset": "test", "dataset_hash": "h"}]}},
            BackfillScope((("r1", "test", "h"),)),
        ),
        (JobKind.ADVERSARY, RUN.to_dict(), RUN),
        (
            JobKind.ADVERSARY,
            {**RUN.to_dict(), "seeds": []},
            AdversaryRun("r2", RUN.attack, ("m1", "m2")),
        ),
        (JobKind.ADVERSARY, None, None),
    ],
)
def test_a_stored_spec_reads_back_typed_by_its_kind(
    kind: JobKind, stored: dict[str, Any] | None, expected: object
) -> None:
    assert job_spec(kind, stored) == expected


def test_an_adversary_run_survives_the_json_it_is_stored_as() -> None:
    import json

    assert AdversaryRun.of(json.loads(json.dumps(RUN.to_dict()))) == RUN


def test_the_worker_claims_an_adversary_job_with_its_run_typed(database_url: str) -> None:
    store = JobStore(Database(database_url))
    try:
        store.register_task("sentiment", 1, {})
        job_id = AttackRuns(store.db, store.clock).start("sentiment", RUN)
        claimed = store.claim("w", 600)
    finally:
        store.db.dispose()
    assert claimed is not None and claimed.id == job_id
    assert claimed.kind is JobKind.ADVERSARY and claimed.spec == RUN


@pytest.mark.parametrize(
    ("kind", "stored"),
    [
        (JobKind.ADVERSARY, {"attack": {}}),
        (JobKind.ADVERSARY, {**RUN.to_dict(), "seeds": [{"inputs": {}}]}),
        (JobKind.ADVERSARY, {**RUN.to_dict(), "models": 3}),
        (JobKind.EVALUATE, {"scope": {"round": "r1"}}),
        (JobKind.EVALUATE, {"scope": {"sets": [{"round": "r1"}]}}),
    ],
)
def test_a_spec_no_release_wrote_reads_as_unreadable(kind: JobKind, stored: dict[str, Any]) -> None:
    assert isinstance(job_spec(kind, stored), UnreadableSpec)


def test_an_unreadable_spec_never_stops_the_queue(database_url: str) -> None:
    """A claim reads the spec: one it cannot read is handed to the worker to fail (as the
    platform's fault), never an error inside the claim, which would leave the job at the
    head of the queue for every worker's every claim."""
    from sqlalchemy import update

    from store.models import JobRow
    from tests.unit.test_store import RUNTIME

    store = JobStore(Database(database_url))
    try:
        store.register_task("sentiment", 1, {})
        bad = AttackRuns(store.db, store.clock).start("sentiment", RUN)
        with store.db.session() as session, session.begin():
            session.execute(update(JobRow).where(JobRow.id == bad).values(spec={"attack": {}}))
        first = store.claim("w", 600)
        assert first is not None and first.id == bad
        assert isinstance(first.spec, UnreadableSpec)
        _, plain = store.submit("sentiment", "m", RUNTIME)
        second = store.claim("w", 600)
        assert second is not None and second.id == plain
    finally:
        store.db.dispose()
