"""Named locks that hold across threads and processes sharing one database.

A name maps to one of ``SLOTS`` slots (a hash): two names may share a slot, which only
makes them wait for each other. In this process a slot is a ``threading.Lock``; across
processes it is a PostgreSQL session advisory lock on a connection of its own, or, on
SQLite, an ``fcntl`` byte-range lock in a file beside the database file. The thread lock
comes first, so each process waits with at most one connection or file lock per slot.
Hold these briefly: a re-check and an insert, never an upload."""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import text

from store.db import Database

SLOTS = 1 << 20
# PostgreSQL advisory locks are keyed (class, object): this class is "DYNA" in ASCII, so
# other users of advisory locks on the same database never wait on ours.
_PG_LOCK_CLASS = 0x44594E41
_thread_locks: dict[int, threading.Lock] = {}
_registry_lock = threading.Lock()
# One descriptor per lock file, kept open for the process's life: closing any descriptor
# of a file drops every fcntl lock this process holds on it.
_lock_files: dict[Path, int] = {}


def slot_of(name: str) -> int:
    """The slot ``name`` locks: a stable hash, the same in every process."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") % SLOTS


@contextmanager
def named_lock(db: Database, name: str) -> Iterator[None]:
    """Hold the lock called ``name`` for every user of ``db``'s database while the block
    runs (blocking until it is free)."""
    slot = slot_of(name)
    with _thread_lock(slot), _process_lock(db, slot):
        yield


def _thread_lock(slot: int) -> threading.Lock:
    with _registry_lock:
        return _thread_locks.setdefault(slot, threading.Lock())


@contextmanager
def _process_lock(db: Database, slot: int) -> Iterator[None]:
    dialect = db.engine.dialect.name
    if dialect == "postgresql":
        with _advisory_lock(db, slot):
            yield
        return
    path = _sqlite_file(db)
    if path is None:  # an in-memory database lives in this process only
        yield
        return
    with _file_range_lock(Path(f"{path}.locks"), slot):
        yield


@contextmanager
def _advisory_lock(db: Database, slot: int) -> Iterator[None]:
    """A session advisory lock on a dedicated connection (not the caller's transactions)."""
    with db.engine.connect() as connection:
        connection.execute(text("SELECT pg_advisory_lock(:c, :k)"), _pg_key(slot))
        connection.commit()  # end the implicit transaction; the session lock stays
        try:
            yield
        finally:
            try:
                connection.execute(text("SELECT pg_advisory_unlock(:c, :k)"), _pg_key(slot))
                connection.commit()
            except Exception:
                # the session is gone or unusable: its locks went with it; never reuse it
                connection.invalidate()
                raise


def _pg_key(slot: int) -> dict[str, int]:
    return {"c": _PG_LOCK_CLASS, "k": slot}


@contextmanager
def _file_range_lock(path: Path, slot: int) -> Iterator[None]:
    descriptor = _lock_file(path)
    fcntl.lockf(descriptor, fcntl.LOCK_EX, 1, slot)
    try:
        yield
    finally:
        fcntl.lockf(descriptor, fcntl.LOCK_UN, 1, slot)


def _lock_file(path: Path) -> int:
    with _registry_lock:
        descriptor = _lock_files.get(path)
        if descriptor is None:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            _lock_files[path] = descriptor
        return descriptor


def _sqlite_file(db: Database) -> Path | None:
    """The database file of a SQLite URL; None for an in-memory one."""
    database = db.engine.url.database
    if not database or database == ":memory:" or database.startswith("file::memory:"):
        return None
    return Path(database).resolve()
