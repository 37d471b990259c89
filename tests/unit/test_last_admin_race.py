"""Two demotions of two different admins at the same moment leave one admin: the check and
the write are one step (a single conditional UPDATE; on PostgreSQL the admins' rows are
locked first). A hook widens every gap between statements, on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading
import time
from typing import Any

from sqlalchemy import event

from store.accounts import AccountError, Accounts
from store.db import Database

ROUNDS = 3


def slow_statements(db: Database) -> None:
    @event.listens_for(db.engine, "after_cursor_execute")
    def pause(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "users" in statement:
            time.sleep(0.03)


def demote(db: Database, name: str, barrier: threading.Barrier, outcomes: dict[str, str]) -> None:
    barrier.wait()
    try:
        Accounts(db).set_role(name, "researcher")
        outcomes[name] = "ok"
    except AccountError as exc:
        outcomes[name] = exc.code


def test_concurrent_demotions_never_leave_no_admin(database_url: str) -> None:
    first = Database(database_url)
    second = Database(database_url, run_migrations=False)
    try:
        for db in (first, second):
            slow_statements(db)
        for attempt in range(ROUNDS):
            names = (f"a{attempt}", f"b{attempt}")
            for name in names:
                Accounts(first).add_user(name, "admin")
            for other in Accounts(first).users():  # only these two are admins this round
                if other["role"] == "admin" and other["name"] not in names:
                    Accounts(first).set_role(other["name"], "researcher")
            barrier = threading.Barrier(2)
            outcomes: dict[str, str] = {}
            threads = [
                threading.Thread(target=demote, args=(db, name, barrier, outcomes))
                for db, name in zip((first, second), names, strict=True)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            admins = [u["name"] for u in Accounts(first).users() if u["role"] == "admin"]
            assert len(admins) == 1, (outcomes, admins)
            assert sorted(outcomes.values()) == ["last_admin", "ok"], outcomes
    finally:
        second.dispose()
        first.dispose()
