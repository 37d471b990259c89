"""Every leaderboard request reads its task's results marks: on SQLite that read is answered
from indexes alone (the (task, created_at) index and the partial index of models whose
image went), never by reading each model's or result's row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event

from store.queries import Queries
from usecases.service import Service


def test_the_results_marks_are_read_from_indexes_alone(tmp_path: Path) -> None:
    service = Service.open(tmp_path / "data")
    try:
        engine = service.db.engine
        statements: list[tuple[str, Any]] = []

        def seen(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
            statements.append((statement, parameters))

        event.listen(engine, "before_cursor_execute", seen)
        try:
            Queries(service.db).results_marks("sentiment")
        finally:
            event.remove(engine, "before_cursor_execute", seen)
        assert len(statements) == 1  # one round trip
        statement, parameters = statements[0]
        with engine.connect() as conn:
            plan = " | ".join(
                str(row[-1])
                for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
            )
    finally:
        service.close()
    assert "USING COVERING INDEX ix_results_task_created_at" in plan, plan
    assert "ix_models_task_image_gone" in plan, plan
    assert "SCAN results" not in plan and "SCAN models" not in plan, plan
