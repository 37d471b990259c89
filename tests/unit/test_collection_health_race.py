"""Two writers whose live models fail at the same moment both leave their health mark: the
round's ``unhealthy`` dict is read and written as one step per round, on SQLite (a named
lock: its driver reads outside the write transaction, so a plain read-modify-write loses
marks) and on PostgreSQL (FOR UPDATE). A hook widens the gap between the read and the
write, so without the lock the test loses marks every time."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import event, func, select

from store.collection import Collection, Written
from store.db import Database
from store.models import CollectedExampleRow, CollectionRoundRow, UserRow

WRITERS = 8
TASK, ROUND = "sentiment", "c1"


def slow_round_reads(db: Database) -> None:
    """Every read of a collection round sleeps after it returns: the window a
    read-modify-write race needs, made wide on purpose."""

    @event.listens_for(db.engine, "after_cursor_execute")
    def pause(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "collection_rounds" in statement:
            time.sleep(0.05)


def test_concurrent_failures_each_keep_their_mark(database_url: str) -> None:
    first = Database(database_url)
    second = Database(database_url, run_migrations=False)
    models = [f"model-{i}" for i in range(WRITERS)]
    writer = str(uuid.uuid4())
    with first.session() as session, session.begin():
        session.add(
            UserRow(id=writer, name="writer", role="researcher", created_at=datetime(2026, 1, 1))
        )
        session.flush()
        session.add(
            CollectionRoundRow(
                task=TASK, round=ROUND, status="open", model_ids=models, settings={},
                unhealthy={}, opened_by=None, opened_at=datetime(2026, 1, 1), frozen_at=None,
            )
        )  # fmt: skip
    for db in (first, second):
        slow_round_reads(db)
    collections = [Collection(first), Collection(second)]
    barrier = threading.Barrier(WRITERS)
    errors: list[BaseException] = []

    def write(index: int) -> None:
        written = Written(
            writer, {"statement": f"text {index}"}, {"label": "positive"}, None,
            models[index], None, None, f"crashed: model {index} exited",
        )  # fmt: skip
        try:
            barrier.wait(timeout=10)
            collections[index % 2].record(TASK, ROUND, written)
        except BaseException as exc:  # reported below, with the marks
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    state = Collection(first).state(TASK, ROUND)
    assert state is not None
    marked = {m.id: m.unhealthy for m in state.models if m.unhealthy is not None}
    assert sorted(marked) == models  # every mark kept, none lost to another writer
    with first.session() as session:
        stored = session.scalar(select(func.count()).select_from(CollectedExampleRow))
    assert stored == WRITERS  # and every example is kept, unanswered
    for db in (first, second):
        db.dispose()
