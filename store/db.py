"""Database connection and migrations (Alembic runs on every start, SQLite included)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from configs.settings import load_settings

if TYPE_CHECKING:
    from alembic.config import Config

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
    data_dir.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{data_dir / 'dynaeval.sqlite3'}"


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
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


class Database:
    """Engine + session factory; ``migrate()`` is called on open."""

    def __init__(self, url: str, *, run_migrations: bool = True) -> None:
        self.url = url
        self.engine = make_engine(url)
        if run_migrations:
            migrate(self.engine)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    def session(self) -> Session:
        return self.sessions()

    def dispose(self) -> None:
        self.engine.dispose()
