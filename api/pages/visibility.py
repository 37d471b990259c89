"""Who may see a page: every page is public (``api.auth`` level), but a private task, its
leaderboard and its models exist only for those who may see the task, exactly as the API's
task routes decide."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from api.auth import PUBLIC, accounts, principal

F = TypeVar("F", bound=Callable[..., Any])


def public(func: F) -> F:
    """Mark a page or download view as public for ``api.auth``'s deny-by-default check."""
    func._dynaeval_access = PUBLIC  # type: ignore[attr-defined]
    return func


def task_visible(name: str) -> bool:
    found = accounts().task_access().get(name)
    return found is None or principal().may_see_task(found)


def model_visible(model_id: str) -> bool:
    """A submission's scores are its submitter's, its task owner's and the admins' (as the
    API's ``/submissions/<id>`` decides); the leaderboard's axes are what is public."""
    found = accounts().model_access(model_id)
    return found is not None and principal().may_see_model(*found)
