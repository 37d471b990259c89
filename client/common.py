"""What the ``dynaeval`` sub-commands share: the usage error, task lookup, the service."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from configs.paths import CONFIG_DIR
from configs.schema import ConfigError, TaskSpec

# argparse's sub-command action has no public name; typeshed's is generic in its parser.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

if TYPE_CHECKING:
    import argparse

    from usecases.service import Service


class CliError(Exception):
    """A user error: printed as one line, exit code 2."""


def all_tasks() -> dict[str, TaskSpec]:
    """Every shipped task; a broken config is a usage error naming file and field."""
    from evaluator.tasks import load_tasks  # here: it imports numpy, which --help never needs

    try:
        return load_tasks(CONFIG_DIR / "tasks")
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def find_task(name: str) -> TaskSpec:
    """The task called ``name``, or a usage error listing the tasks there are."""
    tasks = all_tasks()
    if name not in tasks:
        raise CliError(f"unknown task {name!r} (tasks: {', '.join(sorted(tasks))})")
    return tasks[name]


def open_service(allow_local: bool = False, allowed_registries: list[str] | None = None) -> Service:
    """The configured database, blob folder and tasks (migrated on open); registries on local
    networks that submissions may name: ``allowed_registries`` on top of the environment's."""
    from store.outages import DATABASE_OUTAGES, outage_reason
    from usecases.service import Service, default_allowed_registries

    allowed = [*default_allowed_registries(), *(allowed_registries or [])]
    try:
        return Service.open(allow_local_runtimes=allow_local, allowed_registries=allowed)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:  # the data folder or the database file cannot be made or opened
        raise CliError(f"the data folder cannot be used: {exc}") from None
    except DATABASE_OUTAGES as exc:  # the driver's first line: never the URL's password
        raise CliError(f"the database cannot be opened: {outage_reason(exc)}") from None
