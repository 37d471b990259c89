"""Alembic migrations: applied to an empty database on each backend (a SQLite file and a
throwaway PostgreSQL cluster) they give exactly the models' schema, and a downgrade/upgrade
round trip works."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from store.db import Database, alembic_config, head_revision, make_engine, migrate
from store.models import Base

pytestmark = pytest.mark.real_migrations

TABLES = {"tasks", "models", "jobs", "job_attempts", "results", "scores", "users", "api_tokens"}


def _diff(engine) -> list:  # type: ignore[no-untyped-def]
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"render_as_batch": True})
        return compare_metadata(context, Base.metadata)


def _head(url: str) -> str:
    return ScriptDirectory.from_config(alembic_config(url)).get_current_head()


def _current(engine) -> str | None:  # type: ignore[no-untyped-def]
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def test_upgrade_head_on_an_empty_database_matches_the_models(database_url: str) -> None:
    engine = make_engine(database_url)
    migrate(engine)
    assert set(inspect(engine).get_table_names()) >= TABLES
    assert _current(engine) == _head(database_url)
    assert _diff(engine) == []
    engine.dispose()


def test_unique_score_key_exists_in_the_migrated_schema(database_url: str) -> None:
    engine = make_engine(database_url)
    migrate(engine)
    uniques = inspect(engine).get_unique_constraints("scores")
    columns = {tuple(u["column_names"]) for u in uniques}
    assert (
        "model_id",
        "task",
        "round",
        "dataset",
        "dataset_hash",
        "variant",
        "variant_version",
        "seed",
        "slice",
        "metric",
    ) in columns
    engine.dispose()


def test_downgrade_base_then_upgrade_head_round_trip(database_url: str) -> None:
    url = database_url
    config = alembic_config(url)
    command.upgrade(config, "head")
    command.downgrade(config, "base")
    engine = make_engine(url)
    assert set(inspect(engine).get_table_names()) & TABLES == set()
    assert _current(engine) is None
    engine.dispose()
    command.upgrade(config, "head")
    engine = make_engine(url)
    assert _diff(engine) == []
    assert _current(engine) == _head(url)
    engine.dispose()


def test_migrate_is_idempotent_and_database_opens_twice(database_url: str) -> None:
    url = database_url
    first = Database(url)
    first.dispose()
    second = Database(url)  # the embedded default runs migrations on every start
    assert _diff(second.engine) == []
    second.dispose()


def test_a_database_at_head_opens_without_loading_the_migrations(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alembic's upgrade reads its environment and every revision's script on each call: a
    service opening an up-to-date database (every start after the first) skips it."""
    upgrades: list[str] = []
    real_upgrade = command.upgrade

    def counted(config, revision):  # type: ignore[no-untyped-def]
        upgrades.append(revision)
        return real_upgrade(config, revision)

    monkeypatch.setattr(command, "upgrade", counted)
    Database(database_url).dispose()
    assert upgrades == ["head"]  # empty: migrated
    Database(database_url).dispose()
    assert upgrades == ["head"]  # at head: not again
    config = alembic_config(database_url)
    real_upgrade(config, "head")
    command.downgrade(config, "-1")
    reopened = Database(database_url)  # one revision behind: migrated again
    assert upgrades == ["head", "head"] and _diff(reopened.engine) == []
    assert _current(reopened.engine) == _head(database_url) == head_revision()
    reopened.dispose()


def test_every_revision_has_a_downgrade() -> None:
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    revisions = list(script.walk_revisions())
    assert revisions, "no migration found"
    for revision in revisions:
        assert callable(getattr(revision.module, "downgrade", None)), revision.revision
