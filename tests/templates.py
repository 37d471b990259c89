"""Migrate once per test session, copy per test.

Opening a ``Database`` migrates it: through every Alembic revision on an empty database,
0.3 s on SQLite and more on PostgreSQL, which once was most of a unit test's time. Here the
schema is built once per session (per xdist worker) into a template, and a new empty
database starts as its copy: a SQLite file gets the template's bytes before the first
connection; a PostgreSQL database is created ``TEMPLATE`` the migrated one. ``migrate`` then
finds the schema at head and does nothing, as it would on any started service.

Tests about migrating itself (marker ``real_migrations``) get truly empty databases.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

import store.db
from store.db import Database

TEMPLATE_DB = "dynaeval_template"


class SqliteTemplate:
    """``store.db.migrate`` that first fills an empty SQLite file from a migrated template."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "template.sqlite3"
        Database(f"sqlite:///{self.path}").dispose()  # the one real migration
        self.enabled = True
        self._real: Callable[[Engine], None] = store.db.migrate

    def migrate(self, engine: Engine) -> None:
        location = engine.url.database if engine.dialect.name == "sqlite" else None
        if self.enabled and location and location != ":memory:" and _empty(Path(location)):
            with Path(location).open("r+b") as target, self.path.open("rb") as source:
                shutil.copyfileobj(source, target)  # keeps the file's 0600
        self._real(engine)

    def install(self) -> None:
        store.db.migrate = self.migrate  # type: ignore[assignment]

    def uninstall(self) -> None:
        store.db.migrate = self._real  # type: ignore[assignment]


def _empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0 and not os.path.exists(f"{path}-wal")
    except FileNotFoundError:
        return False


def make_postgres_template(admin: Engine, url_of: Callable[[str], str]) -> str:
    """A migrated database to clone (``CREATE DATABASE … TEMPLATE``); its name."""
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{TEMPLATE_DB}"'))
        connection.execute(text(f'CREATE DATABASE "{TEMPLATE_DB}"'))
    Database(url_of(TEMPLATE_DB)).dispose()  # no connection may stay open on a template
    return TEMPLATE_DB


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """A folder that ``build`` fills, made once per test run and shared by its xdist
    workers: the first to ask builds it while the others wait on a lock, then all reuse it.
    It is shared: copy it before writing to it."""
    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above each worker's own
    folder = root / f"built-{name}"
    with (root / f"built-{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / f"built-{name}.failed").exists():
            raise RuntimeError(f"building {name} failed in another test process: see its error")
        if not (folder / ".built").exists():
            try:
                if folder.exists():
                    shutil.rmtree(folder)  # an earlier build that stopped half-way
                folder.mkdir()
                build(folder)
            except BaseException:
                (root / f"built-{name}.failed").touch()  # the others fail at once, not again
                raise
            (folder / ".built").touch()
    return folder
