"""A board's results version is read from an index: every leaderboard request reads it, and
at 10,000 results a read of the rows cost more than the rest of the request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event

from usecases.service import Service


def test_the_results_count_and_newest_time_come_from_an_index(tmp_path: Path) -> None:
    service = Service.open(tmp_path / "data")
    statements: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        statements.append((statement, parameters))

    event.listen(service.db.engine, "before_cursor_execute", record)
    try:
        service.queries.results_marks("sentiment")
    finally:
        event.remove(service.db.engine, "before_cursor_execute", record)
    plans = []
    with service.db.engine.connect() as connection:
        for statement, parameters in statements:
            if statement.lstrip().upper().startswith("SELECT"):
                rows = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
                plans.append(" ".join(str(row[-1]) for row in rows))
    service.close()
    assert len(plans) == 2, plans
    assert "USING COVERING INDEX ix_results_task_created_at" in plans[0], plans
    assert "SCAN" not in " ".join(plans), plans
