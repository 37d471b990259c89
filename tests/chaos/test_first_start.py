"""Processes that start at once on a fresh database all come up: the schema is created once,
under a lock (an advisory lock on PostgreSQL, a lock file on SQLite)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

pytestmark = pytest.mark.real_migrations

STARTERS = 4
# Each starter waits for the same go file, then opens (and so migrates) the database.
_START = """
import os, sys, time
go = sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.002)
from store.db import Database
Database(sys.argv[1]).dispose()
"""


def test_starters_at_once_on_a_fresh_database_all_come_up(
    database_url: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    starters = [
        subprocess.Popen(
            [sys.executable, "-c", _START, database_url, str(go)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(STARTERS)
    ]
    time.sleep(2.0)  # every starter has imported and waits at the line
    go.touch()
    errors = [p.communicate(timeout=120)[1] for p in starters]
    assert [p.returncode for p in starters] == [0] * STARTERS, "\n".join(errors)
    engine = create_engine(database_url)
    try:
        assert "tasks" in inspect(engine).get_table_names()
    finally:
        engine.dispose()
