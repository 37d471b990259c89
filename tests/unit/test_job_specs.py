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
