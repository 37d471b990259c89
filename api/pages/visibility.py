"""Who may see a page: every page is public (``api.auth`` level), but a private task, its
leaderboard and its models exist only for those who may see the task, exactly as the API's
task routes decide. A model's page and full scores are its submitter's, its task owner's
and the admins', and everyone's once its submitter publishes it; the failure reason and
log tail are never published."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flask import current_app

from api.auth import accounts, principal
from api.context import task_visible
from api.errors import ApiError
from store.rules.principals import ModelAccess

F = TypeVar("F", bound=Callable[..., Any])


def readable_model(model_id: str) -> ModelAccess | None:
    """The submission if the caller may read its page and scores (published, or theirs to
    see), on a task they may see; None otherwise."""
    found = accounts().model_publication(model_id)
    if found is None or not task_visible(found.task) or not principal().may_read_model(found):
        return None
    return found


def model_visible(model_id: str) -> bool:
    """May the caller open this model's page and full scores?"""
    return readable_model(model_id) is not None


def openable_models(task: str) -> frozenset[str]:
    """The ids of ``task``'s models whose pages the caller may open (one query for a whole
    leaderboard: asking model by model cost two queries a row)."""
    if not task_visible(task):
        return frozenset()
    who = principal()
    return frozenset(
        m.model_id for m in accounts().task_publications(task) if who.may_read_model(m)
    )


def model_private_visible(found: ModelAccess) -> bool:
    """The failure reason and log tail: the submitter's, task owner's and admins' only."""
    return principal().may_see_model(found.task, found.owner_id)


def readable_submission(
    model_id: str, *, with_scores: bool = False, with_queue: bool = False
) -> dict[str, Any]:
    """A submission as ``GET /api/v1/submissions/<id>`` shows it to the caller: whole to
    those who may see it, without failures and log tails to readers of a published one;
    404 ``unknown_submission`` to everyone else (guessed ids alike)."""
    found = readable_model(model_id)
    shown = None
    if found is not None:
        service = current_app.extensions["dynaeval"]
        shown = service.queries.submission(
            model_id,
            with_scores=with_scores,
            show_internal=principal().is_admin,
            now=service.clock.now() if with_queue else None,
        )
    if shown is None or found is None:
        raise ApiError(404, "unknown_submission", f"no submission {model_id!r}")
    return shown if model_private_visible(found) else _published_part(shown)


def _published_part(submission: dict[str, Any]) -> dict[str, Any]:
    """A submission without what publishing never shows: failures and log tails."""
    job = submission.get("job")
    if not job:
        return submission
    history = [
        {k: v for k, v in a.items() if k not in ("failure_code", "failure_message")}
        | {"failure_code": None, "failure_message": None}
        for a in job.get("attempt_history") or []
    ]
    return submission | {"job": job | {"failure": None, "attempt_history": history}}


def decide_publication(model_id: str, published: bool) -> ModelAccess:
    """Publish or unpublish a model for the caller: 404 to those who may not read it, 403
    ``not_owner`` unless they submitted it or are an admin."""
    found = readable_model(model_id)
    if found is None:
        raise ApiError(404, "unknown_submission", f"no submission {model_id!r}")
    if not principal().may_publish(found):
        raise ApiError(403, "not_owner", "only the submitter or an admin publishes a model")
    changed = accounts().set_published(model_id, published)
    if changed is None:  # deleted meanwhile
        raise ApiError(404, "unknown_submission", f"no submission {model_id!r}")
    return changed
