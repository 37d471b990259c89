"""The application context a route reads: the service, and the task its URL names as the
caller may see or change it. Every blueprint imports these from here, so no route module
is another's hub."""

from __future__ import annotations

from flask import current_app

from api.auth import accounts, principal
from api.errors import ApiError
from configs.schema import TaskSpec
from store.rules.principals import TaskAccess
from usecases.service import Service


def service() -> Service:
    found: Service = current_app.extensions["dynaeval"]
    return found


def task_visible(name: str) -> bool:
    """Whether the caller may see the task (a public one, or a private one of theirs)."""
    return _visible(accounts().task_access(name).get(name))


def task_or_404(name: str) -> TaskSpec:
    """The task, if it exists and the caller may see it (a private task is 404 to others)."""
    task = service().tasks.get(name)
    if task is None or not task_visible(name):
        access = accounts().task_access()
        known = ", ".join(sorted(t for t in service().tasks if _visible(access.get(t))))
        raise ApiError(404, "unknown_task", f"no task {name!r} (tasks: {known})")
    return task


def _visible(access: TaskAccess | None) -> bool:
    return access is None or principal().may_see_task(access)


def owned_task(task_name: str) -> TaskSpec:
    """The task, if the caller may change it (outsiders of a private task get a 404)."""
    task = task_or_404(task_name)
    who = principal()
    if not (who.is_admin or task.name in who.owned_tasks):
        raise ApiError(403, "not_task_owner", "only the task's owner or an admin does this")
    return task
