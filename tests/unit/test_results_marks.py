"""A board's results marks (``Queries.results_marks``): every leaderboard request reads them,
so on SQLite they are one statement answered from indexes alone (the (task, created_at)
index, and a partial index of only the models whose image went); and they change with
every change a board shows, a mark taken back and set again included."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import event, text

from configs.vocabulary.clock import ManualClock
from store.retention import _unmark, mark_image_gone
from tests.browser.seed import finish, result
from usecases.service import Service

TASK = "sentiment"


def test_the_results_marks_are_one_statement_read_from_indexes_alone(tmp_path: Path) -> None:
    service = Service.open(tmp_path / "data")
    statements: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        statements.append((statement, parameters))

    event.listen(service.db.engine, "before_cursor_execute", record)
    try:
        service.queries.results_marks(TASK)
    finally:
        event.remove(service.db.engine, "before_cursor_execute", record)
    with service.db.engine.connect() as connection:
        (statement, parameters), *others = statements
        rows = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
        plan = " | ".join(str(row[-1]) for row in rows)
        partial = connection.execute(
            text("SELECT sql FROM sqlite_master WHERE name = 'ix_models_task_image_gone'")
        ).scalar_one()
    service.close()
    assert others == []  # one round trip
    assert "USING COVERING INDEX ix_results_task_created_at" in plan, plan
    assert "USING INDEX ix_models_task_image_gone" in plan, plan
    assert not re.search(r"SCAN (TABLE )?(results|models)\b", plan), plan
    assert "WHERE image_gone_at IS NOT NULL" in partial  # only the models whose image went


def test_the_marks_change_when_a_mark_is_taken_back_and_set_again(tmp_path: Path) -> None:
    clock = ManualClock()
    service = Service.open(tmp_path / "data", clock=clock)
    try:
        evaluation = result(service, [60.0] * 3, 100.0, 0.5, 90.0, 90.0, seed=1)
        first = finish(service, "a", evaluation)
        second = finish(service, "b", result(service, [70.0] * 3, 90.0, 0.5, 90.0, 90.0, seed=2))
        assert mark_image_gone(service.db, first, "removed by retention", clock.now())
        before = service.queries.results_marks(TASK)
        _unmark(service.db, first)  # its removal failed: the mark is taken back
        clock.advance(timedelta(seconds=5).total_seconds())
        assert mark_image_gone(service.db, second, "removed by retention", clock.now())
        after = service.queries.results_marks(TASK)
    finally:
        service.close()
    assert after.images_gone == before.images_gone == 1  # the same count...
    assert after != before  # ...and still another board
    assert after.newest_gone == clock.now()
