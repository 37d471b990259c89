"""A job's spec crosses from the store to the worker typed by the job's kind: a backfill's
scope, an adversary run's round, settings, models and seeds, or nothing; and so does its
checkpoint (an adversary run's progress)."""

from __future__ import annotations

from typing import Any

import pytest

from configs.vocabulary.jobs import (
    AdversaryCheckpoint,
    AdversaryRun,
    BackfillScope,
    JobKind,
    Seed,
    UnreadableSpec,
    job_checkpoint,
    job_spec,
)
from store.adversary import AdversaryRuns
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
        job_id = AdversaryRuns(store.db, store.clock).start("sentiment", RUN)
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
        bad = AdversaryRuns(store.db, store.clock).start("sentiment", RUN)
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


PROGRESS = AdversaryCheckpoint(3, 17, 1, {"m2": "timed out"})


@pytest.mark.parametrize(
    ("kind", "stored", "expected"),
    [
        (JobKind.ADVERSARY, None, None),
        (JobKind.ADVERSARY, {}, None),
        (JobKind.ADVERSARY, PROGRESS.to_dict(), PROGRESS),
        (
            JobKind.ADVERSARY,
            {**PROGRESS.to_dict(), "stopped_because": "budget"},
            AdversaryCheckpoint(3, 17, 1, {"m2": "timed out"}, "budget"),
        ),
        (JobKind.ADVERSARY, {"next_source": "two"}, None),  # no release wrote it: start over
        (JobKind.ADVERSARY, {"failed_models": ["m2"]}, None),
        (JobKind.ADVERSARY, {"queries_used": float("inf")}, None),
        (JobKind.EVALUATE, PROGRESS.to_dict(), None),  # only an adversary run resumes
    ],
)
def test_a_stored_checkpoint_reads_back_typed_by_its_kind(
    kind: JobKind, stored: dict[str, Any] | None, expected: object
) -> None:
    assert job_checkpoint(kind, stored) == expected


def test_a_checkpoint_is_stored_as_the_json_runs_have_always_shown() -> None:
    assert list(PROGRESS.to_dict()) == ["next_source", "queries_used", "proposals", "failed_models"]
    ended = AdversaryCheckpoint(stopped_because="sources").to_dict()
    assert ended == {"next_source": 0, "queries_used": 0, "proposals": 0, "failed_models": {},
                     "stopped_because": "sources"}  # fmt: skip


def test_a_claimed_adversary_job_resumes_from_its_typed_checkpoint(database_url: str) -> None:
    store = JobStore(Database(database_url))
    try:
        store.register_task("sentiment", 1, {})
        runs = AdversaryRuns(store.db, store.clock)
        job_id = runs.start("sentiment", RUN)
        first = store.claim("w", 600)
        assert first is not None and first.checkpoint is None
        assert runs.save_progress(job_id, "w", first.lease, PROGRESS, [])
        [shown] = runs.runs("sentiment", "r2")
        assert shown.checkpoint == PROGRESS
    finally:
        store.db.dispose()
