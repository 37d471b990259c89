"""A task's rows read incrementally equal a whole read at every step: new models, a newer
result of a known model, results stored at the same instant, an image that goes; and the
boards kept warm in the background are the ones a request then finds."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from configs.vocabulary.clock import ManualClock
from store.queries import Queries
from store.retention import mark_image_gone
from tests.browser.seed import finish, result
from usecases.boards.cache import RowCache, cache_of, keep_boards_warm, prepared
from usecases.service import Service

TASK = "sentiment"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = Service.open(tmp_path / "data", clock=ManualClock())
    yield svc
    svc.close()


def scored(service: Service, name: str, performance: float) -> str:
    evaluation = result(service, [performance] * 3, 100.0, 0.5, 90.0, 90.0, seed=int(performance))
    return finish(service, name, evaluation)


def assert_same_as_a_whole_read(cache: RowCache, service: Service) -> None:
    _, rows = cache.rows(service, TASK)
    assert rows == service.queries.leaderboard_rows(TASK)


def test_incremental_rows_equal_a_whole_read_at_every_step(service: Service) -> None:
    clock = service.clock
    assert isinstance(clock, ManualClock)
    cache = RowCache()
    assert_same_as_a_whole_read(cache, service)  # empty
    scored(service, "a", 50.0)
    scored(service, "b", 60.0)
    assert_same_as_a_whole_read(cache, service)
    scored(service, "c", 70.0)  # the same instant as the last read's newest
    assert_same_as_a_whole_read(cache, service)
    clock.advance(5)
    scored(service, "d", 40.0)
    assert_same_as_a_whole_read(cache, service)
    # a newer result of a known model (a rerun) keeps the model's place, with new numbers
    first = service.queries.leaderboard_rows(TASK)[0]["model_id"]
    service.store.enqueue(first)
    claimed = service.store.claim("w", 60)
    assert claimed is not None and claimed.model_id == first
    clock.advance(5)
    newer = result(service, [99.0] * 3, 100.0, 0.5, 90.0, 90.0, seed=99)
    assert service.store.finish(claimed.id, "w", newer, lease=claimed.lease)
    assert_same_as_a_whole_read(cache, service)
    _, rows = cache.rows(service, TASK)
    assert rows[0]["model_id"] == first and rows[0]["performance"] == pytest.approx(99.0)
    # an image that goes changes a row without a new result: read whole again
    assert mark_image_gone(service.db, first, "removed by retention", clock.now())
    assert_same_as_a_whole_read(cache, service)
    assert cache.rows(service, TASK)[1][0]["image_gone"] is not None


def test_a_result_that_lands_after_a_newer_one_is_read(service: Service) -> None:
    """A result's time is taken before its transaction commits, so a slower worker's result
    may land after a newer one was read: it was never read, and its model never shown."""
    clock = service.clock
    assert isinstance(clock, ManualClock)
    cache = RowCache()
    scored(service, "a", 50.0)
    clock.advance(10)
    scored(service, "b", 60.0)
    assert_same_as_a_whole_read(cache, service)
    clock.advance(-5)  # stored now with the time it had before b was
    scored(service, "late", 70.0)
    clock.advance(5)
    assert_same_as_a_whole_read(cache, service)
    assert "late" in [row["name"] for row in cache.rows(service, TASK)[1]]


def test_boards_kept_warm_are_the_ones_requests_find(service: Service) -> None:
    for i in range(3):
        scored(service, f"m{i}", 50.0 + i)
    stop = threading.Event()
    warmer = threading.Thread(target=keep_boards_warm, args=(service, stop, 0.01))
    warmer.start()
    try:
        deadline = threading.Event()
        for _ in range(500):  # bounded: the first pass prepares every task's board
            if len(cache_of(service)._boards) >= len(service.tasks):
                break
            deadline.wait(0.01)
        built = len(cache_of(service)._boards)
        assert built >= len(service.tasks)
        board = prepared(service, service.tasks[TASK])
        assert len(cache_of(service)._boards) == built  # found, not built again
        assert len(board.ids) == 3
    finally:
        stop.set()
        warmer.join(timeout=10)
    assert not warmer.is_alive()


def test_only_boards_viewers_look_at_are_prepared_again_as_results_land(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    from usecases.boards import cache

    built: list[str] = []
    real = cache.prepare_board

    def counted(task: Any, *args: Any, **kwargs: Any) -> Any:
        built.append(task.name)
        return real(task, *args, **kwargs)

    monkeypatch.setattr(cache, "prepare_board", counted)
    scored(service, "m0", 50.0)
    stop = threading.Event()
    warmer = threading.Thread(target=keep_boards_warm, args=(service, stop, 0.01))
    warmer.start()
    try:
        wait_for(lambda: set(built) >= set(service.tasks))  # every board once, at start
        scored(service, "m1", 60.0)  # a result lands while nobody looks at the board
        threading.Event().wait(0.3)  # ~30 of the warmer's rounds
        assert Counter(built)[TASK] == 1
        prepared(service, service.tasks[TASK])  # a viewer looks (and prepares it anew)
        viewed = Counter(built)[TASK]
        scored(service, "m2", 70.0)  # now a result lands on a board being looked at
        wait_for(lambda: Counter(built)[TASK] > viewed)
    finally:
        stop.set()
        warmer.join(timeout=10)


def wait_for(condition: Any) -> None:
    pause = threading.Event()
    for _ in range(1000):  # bounded: 10 s at most
        if condition():
            return
        pause.wait(0.01)
    raise AssertionError("the warmer never got there")


def test_a_request_during_the_same_preparation_waits_for_it_instead_of_repeating_it(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At start the background preparation and the first viewer both wanted the same board:
    each read every row and prepared it, side by side on the same cores."""
    from usecases.boards import cache

    scored(service, "m0", 50.0)
    scored(service, "m1", 60.0)
    asked, reads, builds = Counter[str](), [], []
    both_asked = threading.Event()
    real_marks, real_rows = Queries.results_marks, Queries.leaderboard_rows
    real_prepare = cache.prepare_board

    def marks(self: Queries, task: str) -> Any:
        asked[task] += 1
        if asked[task] >= 2:
            both_asked.set()
        return real_marks(self, task)

    def rows(self: Queries, task: str, since: Any = None) -> Any:
        both_asked.wait(5)  # the other caller is in prepared() too before this read goes on
        reads.append(task)
        return real_rows(self, task, since=since)

    def prepare(task: Any, *args: Any, **kwargs: Any) -> Any:
        builds.append(task.name)
        return real_prepare(task, *args, **kwargs)

    monkeypatch.setattr(Queries, "results_marks", marks)
    monkeypatch.setattr(Queries, "leaderboard_rows", rows)
    monkeypatch.setattr(cache, "prepare_board", prepare)
    task = service.tasks[TASK]
    boards: list[Any] = []
    callers = [threading.Thread(target=lambda: boards.append(prepared(service, task)))]
    callers.append(threading.Thread(target=lambda: boards.append(prepared(service, task))))
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(timeout=30)
    assert len(boards) == 2 and boards[0] is boards[1]
    assert reads == [TASK] and builds == [TASK]
