"""A collection round's page: its status, vMER per model and per writer (machine proposals
and unvalidated examples apart), and for a signed-in user the next example in their
validation queue with a plain form (no script) to judge it.

The form posts to this blueprint; the app-wide guard applies the same Origin/CSRF rule as
every other page form, and its errors come back as a page with a sentence."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from api.auth import principal
from api.context import service, task_visible
from api.errors import ApiError
from api.validation import cast_vote, queued_json, validation
from metrics.outputs import get_output_type
from metrics.vmer import VERDICTS
from store.rules.principals import READ, SUBMIT
from store.validation import CollectionRound
from usecases.collection.validation import vmer_of

round_pages = Blueprint("round_pages", __name__, template_folder="templates")


def _round_or_none(task_name: str, round_name: str) -> CollectionRound | None:
    if service().tasks.get(task_name) is None or not task_visible(task_name):
        return None
    return validation().collection_round(task_name, round_name)


def _next_example(found: CollectionRound) -> dict[str, Any] | None:
    """The first example of the viewer's queue (None when signed out or nothing waits)."""
    who = principal()
    if who.user_id is None or READ not in who.scopes or found.status == "frozen":
        return None
    queue = validation().queue(found.task, found.round, who.user_id, limit=1)
    return queued_json(queue[0]) if queue else None


@round_pages.route("/tasks/<task_name>/rounds/<round_name>")
def round_page(task_name: str, round_name: str) -> tuple[str, int]:
    found = _round_or_none(task_name, round_name)
    if found is None:
        message = f"There is no collection round “{round_name}” of task “{task_name}”."
        return render_template("pages/not_found.html", message=message), 404
    task = service().tasks[task_name]
    return render_template(
        "pages/round.html",
        round=found,
        round_task=task,
        round_output=get_output_type(task.output_type),
        vmer=vmer_of(service(), found),
        example=_next_example(found),
        verdicts=VERDICTS,
        may_vote=SUBMIT in principal().scopes,
        voted=request.args.get("voted"),
    ), 200


@round_pages.route("/tasks/<task_name>/rounds/<round_name>/votes", methods=["POST"])
def vote_form(task_name: str, round_name: str) -> Response:
    """The page's validation form (as ``POST /api/v1/examples/<id>/votes``)."""
    found = _round_or_none(task_name, round_name)
    example_id = request.form.get("example_id", "")[:64]
    verdict = request.form.get("verdict", "")
    ref = validation().example(example_id) if found is not None else None
    if ref is None or (ref.task, ref.round) != (task_name, round_name):
        raise ApiError(404, "unknown_example", "there is no such example in this round")
    if verdict not in VERDICTS:
        raise ApiError(422, "invalid_verdict", f"a verdict is one of {', '.join(VERDICTS)}")
    cast_vote(example_id, verdict)
    target = url_for(
        "round_pages.round_page", task_name=task_name, round_name=round_name, voted=verdict
    )
    return redirect(target, 303)


def _form_error(exc: ApiError) -> tuple[str, int, dict[str, str]]:
    """Any refusal on these pages (a foreign origin, no login, a second vote) as a
    sentence on a page, not JSON."""
    if exc.status == 401:
        message = "Sign in first: validating needs an account."
    else:
        message = exc.message[:1].upper() + exc.message[1:]
        message = message if message.endswith(".") else message + "."
    page = render_template("pages/not_found.html", heading="Not done", message=message)
    return page, exc.status, exc.headers


round_pages.register_error_handler(ApiError, _form_error)
