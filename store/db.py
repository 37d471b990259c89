"""Database connection and migrations (Alembic runs on every start, SQLite included)."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, inspect, make_url, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from configs.settings import load_settings

if TYPE_CHECKING:
    from alembic.config import Config

T = TypeVar("T")

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def default_data_dir() -> Path:
    """The data folder of the settings (``$DYNAEVAL_DATA_DIR``, the settings file, or
    ``./dynaeval-data``)."""
    return load_settings().data_dir


def default_database_url(data_dir: Path | None = None) -> str:
    """The settings' database URL, else a SQLite file in ``data_dir`` (default: the settings'
    data folder), which is created."""
    settings = load_settings()
    if not settings.is_default("database_url"):
        return settings.database_url
    data_dir = data_dir or settings.data_dir
    make_private_dir(data_dir)
    return f"sqlite:///{data_dir / 'dynaeval.sqlite3'}"


def make_private_dir(path: Path) -> None:
    """The data folder, created or narrowed to 0700: it holds the database, the blobs, the
    sealing key and the local admin's token."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    found = path.stat()
    if found.st_mode & 0o077 and found.st_uid == os.getuid():  # a folder of ours only
        path.chmod(0o700)


def make_private_sqlite(url: str) -> None:
    """A SQLite database file (and its WAL and shared-memory files) readable by its owner
    only: created 0600 before SQLite opens it (SQLite gives the -wal and -shm files the
    database file's mode), and narrowed to 0600 when an older start left it wider."""
    location = make_url(url).database
    if not location or location == ":memory:":
        return
    path = Path(location)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    for each in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if each.exists() and each.stat().st_mode & 0o077:
            each.chmod(0o600)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets the API read while the worker writes; the busy timeout queues writers.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def make_engine(url: str) -> Engine:
    """An engine with the settings each backend needs."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True)


def make_statement_engine(url: str, engine: Engine) -> Engine:
    """The engine for the hottest statements that are each a transaction of their own (a
    claim): on PostgreSQL its connections run in autocommit, so a statement costs one round
    trip instead of three (``BEGIN``, it, ``COMMIT``), and they plan each statement once,
    when first prepared (psycopg), keeping its generic plan: PostgreSQL otherwise planned
    the fair-order query afresh at every claim, which took longer than running it. The
    claim's statements are written for such a plan (store.claims: a closed window, the
    statuses in the SQL), and a test holds them to reading jobs through their indexes.
    Its pool does not ping a connection before lending it (a round trip per claim):
    callers retry once a statement that fails on a connection the server closed
    (``retry_stale``), which also discards the pool's other connections of before then.
    Elsewhere it is ``engine`` itself."""
    if engine.dialect.name != "postgresql":
        return engine
    prepare = {"prepare_threshold": 0} if engine.dialect.driver == "psycopg" else {}
    statements = create_engine(url, isolation_level="AUTOCOMMIT", connect_args=prepare)
    event.listen(statements, "connect", _plan_once)
    return statements


def retry_stale(attempt: Callable[[], T]) -> T:
    """``attempt()``, once more when it failed on a connection the server had closed (a
    restarted or failed-over database): the second runs on a fresh connection."""
    try:
        return attempt()
    except DBAPIError as exc:
        if not exc.connection_invalidated:
            raise
    return attempt()


def _plan_once(dbapi_connection: Any, _record: Any) -> None:
    # SQLAlchemy has put the connection in autocommit by now: the SET holds for the session
    with dbapi_connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode TO force_generic_plan")


def alembic_config(url: str) -> Config:
    # Alembic is imported when a database is opened: commands that never open one
    # (--help, tasks, dynascore) start faster without it.
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest revision."""
    from alembic import command

    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with _migration_lock(engine), engine.begin() as connection:
        if engine.dialect.name == "postgresql":  # released when this transaction ends
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK})
        if _at_head(connection):
            return  # every start after the first: no migration environment to load
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


@functools.cache
def head_revision() -> str | None:
    """The newest migration's revision (the scripts are read once per process)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def _at_head(connection: Connection) -> bool:
    """Whether the schema is already at the newest revision. Asked before ``upgrade``,
    which loads the migration environment and every revision's script on each call."""
    if not inspect(connection).has_table("alembic_version"):
        return False
    rows = connection.execute(text("SELECT version_num FROM alembic_version"))
    stamped: set[str] = set(rows.scalars())
    return stamped == {head_revision()}


# Two processes starting at once on a fresh database must not both create the schema: on
# PostgreSQL an advisory lock (this number is Dynaeval's), on SQLite a lock file beside it.
_PG_LOCK = 0x44594E41


@contextlib.contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    location = engine.url.database if engine.dialect.name == "sqlite" else None
    if not location or location == ":memory:":
        yield
        return
    fd = os.open(f"{location}.migrate-lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class Database:
    """Engine + session factory; ``migrate()`` is called on open."""

    def __init__(self, url: str, *, run_migrations: bool = True) -> None:
        self.url = url
        if url.startswith("sqlite"):
            make_private_sqlite(url)
        self.engine = make_engine(url)
        self.statements = make_statement_engine(url, self.engine)
        if run_migrations:
            migrate(self.engine)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    def session(self) -> Session:
        return self.sessions()

    def dispose(self) -> None:
        self.engine.dispose()
        if self.statements is not self.engine:
            self.statements.dispose()
