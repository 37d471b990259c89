"""A task's board kept across restarts: a start answers from it without reading or
preparing the rows, every page and weighting equal to a board prepared afresh; a kept board
that no longer holds (a new result, other code, another key, an altered file) is not used;
the background preparation keeps each board when it changed, at most every so often, and
on the way out."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from configs.vocabulary.clock import ManualClock
from store.queries import Queries
from tests.browser.seed import finish, result
from usecases.boards import kept
from usecases.boards.assemble import default_round_weights, reweighted
from usecases.boards.cache import _Keeper, keep_boards_warm, prepared
from usecases.boards.leaderboard import PreparedBoard, prepare_board, viewer_weights
from usecases.boards.page import _models_json
from usecases.service import Service

TASK = "sentiment"
WEIGHTINGS = (None, "performance:1,throughput:0,memory:0", "fairness:5,memory:2,robustness:0.5")
PAGES = ((0, 2), (1, 2), (3, 10), (40, 5), (0, None))


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def service(data: Path) -> Iterator[Service]:
    svc = Service.open(data, clock=ManualClock())
    yield svc
    svc.close()


def scored(service: Service, name: str, performance: float, *, fairness: float | None = 90.0):
    evaluation = result(
        service, [performance] * 3, 100.0 + performance, 0.5, 80.0, fairness, seed=int(performance)
    )
    return finish(service, name, evaluation)


def fresh_board(service: Service, name: str = TASK) -> PreparedBoard:
    """The board prepared from the stored rows, bypassing every cache."""
    task = service.tasks[name]
    rows = service.queries.leaderboard_rows(name)
    rolled = reweighted(rows, default_round_weights(task), task)
    return prepare_board(task, rolled, None, current_hashes=service.dataset_hashes(name))


def renders(board: PreparedBoard) -> list[str]:
    task = board.task
    return [
        json.dumps(board.render(viewer_weights(task, w), offset=o, limit=n))
        for w in WEIGHTINGS
        for o, n in PAGES
    ]


def warm_once(service: Service) -> None:
    """One start-to-stop of the background preparation (it keeps the boards on its way out)."""
    stop = threading.Event()
    stop.set()
    keep_boards_warm(service, stop, 0.01)


@pytest.fixture
def row_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = Queries.leaderboard_rows

    def counted(self: Queries, task: str, since: Any = None) -> list[dict[str, Any]]:
        reads.append(task)
        return real(self, task, since)

    monkeypatch.setattr(Queries, "leaderboard_rows", counted)
    return reads


def seeded(service: Service) -> None:
    for i in range(6):
        scored(service, f"m{i}", 50.0 + 3 * i)
    scored(service, "tied", 50.0)  # the same numbers as m0: a tie group
    scored(service, "no-fairness", 70.0, fairness=None)  # unranked: an axis missing


def test_a_restart_answers_from_the_kept_board_without_reading_the_rows(
    data: Path, service: Service, row_reads: list[str]
) -> None:
    seeded(service)
    warm_once(service)
    assert service.blobs.exists(kept.blob_key(TASK))
    expected = fresh_board(service)
    row_reads.clear()
    restarted = Service.open(data, clock=ManualClock())
    try:
        board = prepared(restarted, restarted.tasks[TASK])
        assert row_reads == []  # not one row read, nothing prepared
        assert isinstance(board.entries, kept.LazyRows)
        assert renders(board) == renders(expected)
        hashes = restarted.dataset_hashes(TASK)
        assert _models_json(board, hashes) == _models_json(expected, hashes)  # the page's data
        assert board.unranked == expected.unranked and board.warnings == expected.warnings
        assert prepared(restarted, restarted.tasks[TASK]) is board  # then from memory
        others = {name: renders(fresh_board(service, name)) for name in restarted.tasks}
        row_reads.clear()
        for task in restarted.tasks.values():  # the boards without a model too
            assert renders(prepared(restarted, task)) == others[task.name]
        assert row_reads == []
    finally:
        restarted.close()


@pytest.mark.parametrize(
    "change", ["new result", "altered file", "cut short", "other code", "other key", "outage"]
)
def test_a_kept_board_that_no_longer_holds_is_not_used(
    data: Path, service: Service, row_reads: list[str], change: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    seeded(service)
    warm_once(service)
    key = kept.blob_key(TASK)
    assert service.blobs.exists(key)  # kept, then made not to hold
    if change == "new result":
        scored(service, "landed-after", 99.0)
    elif change == "altered file":
        stored = bytearray(service.blobs.get_bytes(key))
        spot = stored.index(b'"performance": [') + len(b'"performance": [')
        stored[spot] = ord("9") if stored[spot] != ord("9") else ord("8")  # one digit of a score
        service.blobs.put_bytes(key, bytes(stored))
    elif change == "cut short":
        stored = service.blobs.get_bytes(key)
        service.blobs.put_bytes(key, stored[: len(stored) // 2])
    elif change == "outage":

        def unreachable(self: Any, name: str) -> bytes:
            raise ConnectionError("the blob store does not answer")

        monkeypatch.setattr(type(service.blobs), "get_bytes", unreachable)
    elif change == "other code":
        monkeypatch.setattr(kept, "code_fingerprint", lambda: "another build")
    else:
        monkeypatch.setenv("DYNAEVAL_SECRET_KEY", "x" * 43 + "=")  # signed under another
    expected = fresh_board(service)
    row_reads.clear()
    restarted = Service.open(data, clock=ManualClock())
    try:
        board = prepared(restarted, restarted.tasks[TASK])
        assert row_reads == [TASK]  # read and prepared afresh
        assert not isinstance(board.entries, kept.LazyRows)
        assert renders(board) == renders(expected)
    finally:
        restarted.close()


def test_boards_are_kept_when_changed_at_most_every_so_often_and_on_the_way_out(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [0.0]
    keeper = _Keeper(service, every_s=30.0, clock=lambda: now[0])
    task = service.tasks[TASK]
    scored(service, "m0", 50.0)
    writes: list[int] = []
    real = kept.write

    def counted(svc: Service, key: Any, board: PreparedBoard) -> None:
        writes.append(len(board.ids))
        real(svc, key, board)

    monkeypatch.setattr(kept, "write", counted)
    keeper.prepare(task)
    keeper.write_due()
    assert writes == []  # not in the first seconds after a start
    now[0] = 30.0
    keeper.write_due()
    assert writes == [1]
    keeper.prepare(task)
    keeper.write_due()
    assert writes == [1]  # unchanged: not written again
    scored(service, "m1", 60.0)
    now[0] = 40.0
    keeper.prepare(task)
    keeper.write_due()
    assert writes == [1]  # changed, but kept 10 s ago: later
    now[0] = 61.0
    keeper.write_due()
    assert writes == [1, 2]
    scored(service, "m2", 70.0)
    now[0] = 62.0
    keeper.prepare(task)
    keeper.write_due(everything=True)  # on the way out, whenever it was last kept
    assert writes == [1, 2, 3]


def test_a_board_nobody_looks_at_is_prepared_again_every_so_often(service: Service) -> None:
    now = [0.0]
    keeper = _Keeper(service, every_s=30.0, clock=lambda: now[0])
    assert keeper.due(TASK)  # never prepared
    keeper.prepare(service.tasks[TASK])
    now[0] = 29.0
    assert not keeper.due(TASK)
    now[0] = 30.0
    assert keeper.due(TASK)


def test_a_stopping_server_keeps_the_boards_of_results_since_their_last_preparation(
    data: Path, service: Service, row_reads: list[str]
) -> None:
    scored(service, "m0", 50.0)
    warm_once(service)
    scored(service, "m1", 60.0)  # lands after: the next stop keeps it too
    warm_once(service)
    row_reads.clear()
    restarted = Service.open(data, clock=ManualClock())
    try:
        board = prepared(restarted, restarted.tasks[TASK])
        assert row_reads == [] and len(board.ids) == 2
    finally:
        restarted.close()


def test_lazy_rows_read_like_a_list() -> None:
    rows = kept.LazyRows([b'{"a": 1}', b'{"a": 2}', b'{"a": NaN}'])
    assert len(rows) == 3 and rows[1] == {"a": 2} and rows[-2] == {"a": 2}
    assert rows[0:2] == [{"a": 1}, {"a": 2}] and [row["a"] for row in rows][:2] == [1, 2]
    assert rows[0] is rows[0]  # decoded once
    with pytest.raises(IndexError):
        rows[3]


def test_a_failed_write_is_tried_again_later_not_on_every_round(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [0.0]
    keeper = _Keeper(service, every_s=30.0, clock=lambda: now[0])
    tries: list[float] = []

    def failing(svc: Service, key: Any, board: PreparedBoard) -> None:
        tries.append(now[0])
        raise ConnectionError("the blob store does not answer")

    monkeypatch.setattr(kept, "write", failing)
    scored(service, "m0", 50.0)
    task = service.tasks[TASK]
    for second in range(30, 95, 2):  # a viewed board is prepared every round
        now[0] = float(second)
        keeper.prepare(task)
        keeper.write_due()
    assert tries == [30.0, 60.0, 90.0]
    assert TASK not in keeper.boards.kept


def test_a_start_sweeps_what_a_kept_board_write_killed_half_way_left(service: Service) -> None:
    """serve and worker sweep the blob store as they start: a board write that a kill cut
    short leaves a temporary file beside the kept boards, gone a day later (by the
    service's clock), never while it may still be written to."""
    import os
    import tempfile

    from store.blobs import TEMPORARY_PREFIX, UNFINISHED_AFTER_S, LocalBlobStore

    clock: ManualClock = service.clock  # type: ignore[assignment]
    assert isinstance(service.blobs, LocalBlobStore)
    folder = service.blobs.root / "boards"
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=folder, prefix=TEMPORARY_PREFIX)
    os.close(fd)
    written = _epoch(clock)
    os.utime(name, (written, written))
    assert service.sweep_unfinished_writes() == 0 and Path(name).exists()
    clock.advance(UNFINISHED_AFTER_S + 1)
    assert service.sweep_unfinished_writes() == 1 and not Path(name).exists()


def _epoch(clock: ManualClock) -> float:
    from datetime import UTC

    return clock.now().replace(tzinfo=UTC).timestamp()
