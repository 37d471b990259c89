"""The store's rules as pure functions, table by table, without a database: who may see
what, which jobs a quota charges, when an image is removed, which sets a backfill covers,
which live model answers next."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from configs.settings import ImageRetention
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import JobStatus
from store.rules.backfill import stale_sets
from store.rules.loop_models import RESTART_AFTER_S, LoopModel, choose_model
from store.rules.principals import (
    ADMIN,
    ADMIN_SCOPE,
    ANONYMOUS,
    READ,
    RESEARCHER,
    SUBMIT,
    ModelAccess,
    Principal,
    TaskAccess,
)
from store.rules.quotas import is_charged
from store.rules.retention import removal_reason

NOW = datetime(2026, 11, 26, 12, 0)
ALICE = Principal("alice", "alice", RESEARCHER, frozenset({READ, SUBMIT}))
ALICE_SUBMIT_ONLY = Principal("alice", "alice", RESEARCHER, frozenset({SUBMIT}))
OWNER = Principal("olga", "olga", RESEARCHER, frozenset({READ}), owned_tasks=frozenset({"nli"}))
ADMIN_USER = Principal("root", "root", ADMIN, frozenset({READ, ADMIN_SCOPE}))
ADMIN_WITHOUT_SCOPE = Principal("root", "root", ADMIN, frozenset({READ}))


# -- visibility --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("who", "task", "sees"),
    [
        (ANONYMOUS, TaskAccess("nli"), True),
        (ANONYMOUS, TaskAccess("nli", "olga", private=True), False),
        (ALICE, TaskAccess("nli", "olga", private=True), False),
        (OWNER, TaskAccess("nli", "olga", private=True), True),
        (ADMIN_USER, TaskAccess("nli", "olga", private=True), True),
        (ADMIN_WITHOUT_SCOPE, TaskAccess("nli", "olga", private=True), False),  # a read token
    ],
)
def test_who_sees_a_task(who: Principal, task: TaskAccess, sees: bool) -> None:
    assert who.may_see_task(task) is sees


@pytest.mark.parametrize(
    ("who", "model", "reads", "publishes"),
    [
        (ANONYMOUS, ModelAccess("m", "nli", "alice"), False, False),
        (ANONYMOUS, ModelAccess("m", "nli", "alice", published=True), True, False),
        (ALICE, ModelAccess("m", "nli", "alice"), True, True),
        (ALICE_SUBMIT_ONLY, ModelAccess("m", "nli", "alice"), False, True),  # no read scope
        (ALICE, ModelAccess("m", "nli", "bob"), False, False),
        (OWNER, ModelAccess("m", "nli", "bob"), True, False),  # the task's owner reads it
        (OWNER, ModelAccess("m", "qa", "bob"), False, False),
        (ADMIN_USER, ModelAccess("m", "qa", "bob"), True, True),
    ],
)
def test_who_reads_and_publishes_a_model(
    who: Principal, model: ModelAccess, reads: bool, publishes: bool
) -> None:
    assert who.may_read_model(model) is reads
    assert who.may_publish(model) is publishes


# -- quota charging ----------------------------------------------------------------------------
@pytest.mark.parametrize("status", [s.value for s in JobStatus])
@pytest.mark.parametrize("code", [None, *(c.value for c in FailureCode)])
def test_a_quota_charges_live_and_done_jobs_and_the_submitters_own_failures(
    status: str, code: str | None
) -> None:
    live_or_done = status in ("queued", "running", "done")
    own_failure = status == "failed" and code is not None and FailureCode(code).user_caused
    assert is_charged(status, code) is (live_or_done or own_failure)


@pytest.mark.parametrize(
    ("status", "code", "charged"),
    [
        ("failed", "crashed", True),
        ("failed", "platform_error", False),
        ("failed", "worker_lost", False),
        ("cancelled", "cancelled", False),
        ("queued", None, True),
    ],
)
def test_quota_charging_by_hand(status: str, code: str | None, charged: bool) -> None:
    assert is_charged(status, code) is charged


# -- retention ---------------------------------------------------------------------------------
DAY = timedelta(days=1)


@pytest.mark.parametrize(
    ("policy", "scored", "ended", "goes"),
    [
        (ImageRetention(), NOW - 1000 * DAY, NOW - 1000 * DAY, False),  # scored: kept for ever
        (ImageRetention(scored_days=90), NOW - 91 * DAY, None, True),
        (ImageRetention(scored_days=90), NOW - 89 * DAY, None, False),
        (ImageRetention(unscored_days=30), None, NOW - 31 * DAY, True),
        (ImageRetention(unscored_days=30), None, NOW - 29 * DAY, False),
        (ImageRetention(unscored_days=30), None, None, False),  # never ended: still going
        (ImageRetention(unscored_days=None), None, NOW - 1000 * DAY, False),
    ],
)
def test_when_an_image_is_removed(
    policy: ImageRetention, scored: datetime | None, ended: datetime | None, goes: bool
) -> None:
    reason = removal_reason(policy, scored, ended, NOW)
    assert (reason is not None) is goes
    if reason is not None:
        assert "retention policy" in reason


# -- backfill planning -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("scored_on", "current", "stale"),
    [
        ({"r1/test": "a"}, {"r1/test": "a"}, ()),
        ({"r1/test": "a"}, {"r1/test": "b"}, (("r1", "test", "b"),)),
        ({"r1/test": "a"}, {"r1/test": "a", "r2/test": "c"}, (("r2", "test", "c"),)),
        ({}, {"r2/x": "d", "r1/y": "e"}, (("r1", "y", "e"), ("r2", "x", "d"))),
        ({"r1/gone": "z"}, {}, ()),  # a set no longer current needs nothing
    ],
)
def test_a_backfill_covers_the_sets_the_result_was_not_computed_on(
    scored_on: dict[str, str], current: dict[str, str], stale: tuple
) -> None:
    assert stale_sets(scored_on, current).sets == stale


# -- which live model answers ------------------------------------------------------------------
def _model(model_id: str, failed_s_ago: float | None = None) -> LoopModel:
    since = None if failed_s_ago is None else NOW - timedelta(seconds=failed_s_ago)
    return LoopModel(model_id, model_id, {}, None, "crashed" if since else None, since)


@pytest.mark.parametrize(
    ("models", "wanted", "answered", "chosen"),
    [
        ([_model("a"), _model("b")], None, {"a": 3, "b": 1}, "b"),  # the least used
        ([_model("a"), _model("b")], None, {}, "a"),  # ties: the loop's order
        ([_model("a"), _model("b")], "a", {"a": 9}, "a"),  # asked for, and able
        ([_model("a", 5), _model("b")], "a", {}, "b"),  # asked for but crashed just now
        ([_model("a", 5), _model("b", 5)], None, {}, None),  # none may answer
        ([_model("a", RESTART_AFTER_S), _model("b", 5)], None, {}, "a"),  # due for a restart
        ([_model("a", RESTART_AFTER_S + 1)], "a", {}, "a"),
    ],
)
def test_which_live_model_answers_next(
    models: list[LoopModel], wanted: str | None, answered: dict[str, int], chosen: str | None
) -> None:
    found = choose_model(models, wanted, NOW, answered)
    assert (found.id if found else None) == chosen
