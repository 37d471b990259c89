"""Saved views and snapshots of a task's leaderboard: the API (``/api/v1``) and their pages.

A view is a named set of axis and round weights with a stable URL; a task owner (or an
admin) makes one the task's default, which the leaderboard then uses when the viewer
gives no weights (``usecases.boards.default_view``). A snapshot freezes the leaderboard JSON as it is
at that moment, with its weights, dataset hashes and code version: it is stored whole and
never recomputed, so it stays the same when models join or rounds are added."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import flask
from flask import redirect, render_template, url_for
from flask.views import MethodView
from marshmallow import Schema, ValidationError, fields, validate
from werkzeug.wrappers import Response

from api.auth import accounts, principal
from api.bodies import Blueprint
from api.context import service, task_or_404, task_visible
from api.docs import error_docs
from api.errors import ApiError
from api.pages.site import board_page, form_error
from api.schemas import FullMatch, OpenSchema
from configs.schema import TaskSpec
from configs.vocabulary.axes import AXES
from dynascore.weights import Weights
from store.views import SavedSnapshot, SavedView, Views
from usecases.boards import assemble as boards
from usecases.boards.default_view import task_defaults
from usecases.boards.views import save_view, take_snapshot

blp = Blueprint(
    "views", __name__, url_prefix="/api/v1", description="Saved leaderboard views and snapshots"
)
view_pages = flask.Blueprint("view_pages", __name__)
F = TypeVar("F", bound=Callable[..., Any])
ERRORS = {
    401: "unauthenticated (no or unknown credentials), token_expired or token_revoked",
    403: "not_task_owner (only the task's owner or an admin sets its default view), "
    "not_view_owner (only who saved a view, the task's owner or an admin deletes it), "
    "insufficient_scope or cross_site_refused",
    404: "unknown_task, unknown_view or unknown_snapshot (also for a private task's)",
    422: "invalid_weights or a body field out of range",
}


errors = error_docs(blp, ERRORS)


def store() -> Views:
    return Views(service().db, service().clock)


# -- schemas ---------------------------------------------------------------------------------
# A weight is relative: bounded so any five of them add up to a finite number.
MAX_WEIGHT = 1e6
_WEIGHT = fields.Float(validate=validate.Range(min=0, max=MAX_WEIGHT), allow_nan=False)
# Any printable text: a view's name is a label for people (its slug goes in URLs).
VIEW_NAME = FullMatch(r"^[^\x00-\x1f\x7f]{1,128}$", error="1-128 characters, no control characters")


def _axis_weights(description: str, **options: Any) -> fields.Dict:
    """Axis -> weight >= 0, loaded as a dict (the server names an unknown axis in 422
    ``invalid_weights``) and documented axis by axis, no other keys."""
    weight = {"type": "number", "minimum": 0, "maximum": MAX_WEIGHT}
    return fields.Dict(
        keys=fields.String(),
        values=_WEIGHT,
        metadata={
            "description": description,
            "properties": dict.fromkeys(AXES, weight),
            "additionalProperties": False,
        },
        **options,
    )


class ViewCreateSchema(Schema):
    name = fields.String(required=True, validate=VIEW_NAME)
    weights = _axis_weights(
        "axis: weight >= 0; axes left out keep the task's default", load_default=dict
    )
    round_weights = fields.Dict(
        keys=fields.String(),
        values=_WEIGHT,
        load_default=dict,
        metadata={"description": "round: weight >= 0; rounds left out keep the task's"},
    )


class SnapshotCreateSchema(Schema):
    # not nullable: apispec documents a nullable object as "any object"
    weights = _axis_weights("as a view's; default: the leaderboard's default weights")
    round_weights = fields.Dict(keys=fields.String(), values=_WEIGHT, load_default=None)


class DefaultViewSchema(Schema):
    view = fields.String(
        required=True,
        allow_none=True,
        metadata={"description": "a view id or slug of this task; null: the task's own weights"},
    )


class ViewSchema(OpenSchema):
    id = fields.String()
    task = fields.String()
    slug = fields.String()
    name = fields.String()
    weights = fields.Dict(keys=fields.String(), values=fields.Float())
    round_weights = fields.Dict(keys=fields.String(), values=fields.Float())
    default = fields.Boolean(metadata={"description": "the task's default view"})
    url = fields.String(metadata={"description": "the view's page"})
    created_at = fields.String()


class ViewListSchema(OpenSchema):
    views = fields.List(fields.Nested(ViewSchema))


class DefaultViewStateSchema(OpenSchema):
    task = fields.String()
    view = fields.Nested(ViewSchema, allow_none=True)


class SnapshotSchema(OpenSchema):
    id = fields.String()
    task = fields.String()
    created_at = fields.String(metadata={"description": "when the leaderboard was frozen"})
    weights = fields.Dict(keys=fields.String(), values=fields.Float())
    round_weights = fields.Dict(keys=fields.String(), values=fields.Float())
    dataset_hashes = fields.Dict(keys=fields.String(), values=fields.String())
    code_version = fields.String()
    url = fields.String(metadata={"description": "the snapshot's page"})
    leaderboard = fields.Dict(
        metadata={"description": "the leaderboard JSON exactly as it was (never recomputed)"}
    )


def _view_json(view: SavedView) -> dict[str, Any]:
    shown = {k: v for k, v in view.items() if k != "owner_id"}
    shown["url"] = url_for("view_pages.view_page", task_name=view["task"], view=view["slug"])
    return shown


def _snapshot_json(snapshot: SavedSnapshot) -> dict[str, Any]:
    shown = {k: v for k, v in snapshot.items() if k not in ("owner_id", "leaderboard")}
    shown["url"] = url_for("view_pages.snapshot_page", snapshot_id=snapshot["id"])
    shown["leaderboard"] = snapshot["leaderboard"]
    return shown


# -- views -----------------------------------------------------------------------------------
@blp.route("/tasks/<task_name>/views")
class TaskViews(MethodView):
    @blp.alt_response(200, schema=ViewListSchema, success=True)
    @errors(404)
    def get(self, task_name: str) -> dict[str, Any]:
        """The task's saved views, oldest first (the default one marked)."""
        task = task_or_404(task_name)
        return {"views": [_view_json(v) for v in store().views(task.name)]}

    @blp.arguments(ViewCreateSchema)
    @blp.alt_response(201, schema=ViewSchema, success=True)
    @errors(401, 403, 404, 422)
    def post(self, body: dict[str, Any], task_name: str) -> tuple[dict[str, Any], int]:
        """Save named weights as a view of the task (any signed-in user)."""
        task = task_or_404(task_name)
        saved = save_view(
            service(), task, body["name"], body["weights"], body["round_weights"],
            principal().user_id,
        )  # fmt: skip
        return _view_json(saved), 201


@blp.route("/views/<view_id>")
class OneView(MethodView):
    @blp.alt_response(200, schema=ViewSchema, success=True)
    @errors(404)
    def get(self, view_id: str) -> dict[str, Any]:
        """One view by its id (404 for a private task's, to those who may not see it)."""
        return _view_json(_visible_view(view_id))

    @blp.alt_response(200, schema=ViewSchema, success=True)
    @errors(401, 403, 404)
    def delete(self, view_id: str) -> dict[str, Any]:
        """Delete a view (the user who saved it, the task's owner or an admin) and answer it
        as it was; if it was the task's default, the task's configured weights are the default again. Snapshots
        never depend on views: they keep their own weights."""
        found = _visible_view(view_id)
        who = principal()
        if not (
            who.is_admin or found["task"] in who.owned_tasks or found["owner_id"] == who.user_id
        ):
            raise ApiError(
                403, "not_view_owner", "only who saved the view, the task's owner or an admin"
            )
        store().delete_view(view_id)
        return _view_json(found | {"default": False})  # what was deleted, for the record


def _visible_view(view_id: str) -> SavedView:
    found = store().view(view_id)
    if found is None or not task_visible(found["task"]):
        raise ApiError(404, "unknown_view", f"no view {view_id!r}")
    return found


@blp.route("/tasks/<task_name>/default-view", methods=["PUT"])
@blp.arguments(DefaultViewSchema)
@blp.alt_response(200, schema=DefaultViewStateSchema, success=True)
@errors(401, 403, 404, 422)
def put_default_view(body: dict[str, Any], task_name: str) -> dict[str, Any]:
    """Make a view the task's default (its owner or an admin); null goes back to the
    task's configured weights."""
    task = _owned_task(task_name)
    view = None
    if body["view"] is not None:
        view = store().find_view(task.name, body["view"])
        if view is None:
            raise ApiError(404, "unknown_view", f"task {task.name!r} has no view {body['view']!r}")
    store().set_default(task.name, view["id"] if view else None)
    shown = store().view(view["id"]) if view else None
    return {"task": task.name, "view": _view_json(shown) if shown else None}


def _owned_task(task_name: str) -> TaskSpec:
    """The task, if the caller owns it or is an admin (403 ``not_task_owner``; 404 when
    they may not see it)."""
    task = task_or_404(task_name)
    asker = principal()
    if not (asker.is_admin or task.name in asker.owned_tasks):
        raise ApiError(403, "not_task_owner", "only the task's owner or an admin sets its default")
    return task


# -- snapshots -------------------------------------------------------------------------------
@blp.route("/tasks/<task_name>/snapshots", methods=["POST"])
@blp.arguments(SnapshotCreateSchema)
@blp.alt_response(201, schema=SnapshotSchema, success=True)
@errors(401, 403, 404, 422)
def post_snapshot(body: dict[str, Any], task_name: str) -> tuple[dict[str, Any], int]:
    """Freeze the task's leaderboard as it is now (default weights unless given)."""
    defaults = task_defaults(service(), task_or_404(task_name))
    task = defaults.task
    axes = body.get("weights") or {}
    rounds = body["round_weights"] if body["round_weights"] is not None else defaults.round_weights
    frozen = take_snapshot(service(), task, axes, rounds or {}, principal().user_id)
    return _snapshot_json(frozen), 201


def snapshot_or_404(snapshot_id: str) -> SavedSnapshot:
    found = store().snapshot(snapshot_id)
    if found is None or not task_visible(found["task"]):
        raise ApiError(404, "unknown_snapshot", f"no snapshot {snapshot_id!r}")
    return found


@blp.route("/snapshots/<snapshot_id>")
@blp.alt_response(200, schema=SnapshotSchema, success=True)
@errors(404)
def get_snapshot(snapshot_id: str) -> dict[str, Any]:
    """A frozen leaderboard: rows, weights, dataset hashes and code version as they were."""
    return _snapshot_json(snapshot_or_404(snapshot_id))


# -- pages -----------------------------------------------------------------------------------
@view_pages.route("/tasks/<task_name>/views/<view>")
def view_page(task_name: str, view: str) -> tuple[str, int]:
    """A view's stable address: who saved it and when, its weights, and the leaderboard
    ranked for them (the task page's own rendering)."""
    task = service().tasks.get(task_name)
    found = store().find_view(task_name, view) if task and task_visible(task_name) else None
    if task is None or found is None:
        return _not_found(f"Task “{task_name}” has no view “{view}”.")
    asker = principal()
    return board_page(
        "pages/view.html",
        task,
        Weights(dict(found["weights"])),
        dict(found["round_weights"]),
        view=found,
        saved_by=accounts().user_name(found["owner_id"]),
        view_url=url_for("view_pages.view_page", task_name=task.name, view=found["slug"]),
        may_set_default=asker.is_admin or task.name in asker.owned_tasks,
    )


# -- the pages' forms (no JavaScript): the API's own code, then a redirect -------------------
@view_pages.route("/tasks/<task_name>/snapshots", methods=["POST"])
def snapshot_form(task_name: str) -> Response:
    """The leaderboard's "Freeze a snapshot" button, for the weights it shows."""
    task = task_defaults(service(), task_or_404(task_name)).task  # as the API's default
    weights, round_weights = _form_weights(task)
    frozen = take_snapshot(service(), task, weights, round_weights, principal().user_id)
    return redirect(url_for("view_pages.snapshot_page", snapshot_id=frozen["id"]), 303)


@view_pages.route("/tasks/<task_name>/views", methods=["POST"])
def view_form(task_name: str) -> Response:
    """The leaderboard's "Save this view" form."""
    task = task_or_404(task_name)
    name = flask.request.form.get("name", "").strip()
    try:
        VIEW_NAME(name)
    except ValidationError:
        raise ApiError(422, "invalid_name", "a view's name is 1-128 characters") from None
    weights, round_weights = _form_weights(task)
    saved = save_view(service(), task, name, weights, round_weights, principal().user_id)
    return redirect(url_for("view_pages.view_page", task_name=task.name, view=saved["slug"]), 303)


@view_pages.route("/tasks/<task_name>/views/<view>/default", methods=["POST"])
def default_form(task_name: str, view: str) -> Response:
    """The view page's "make this the task's default" button (owner or admin)."""
    task = _owned_task(task_name)
    found = store().find_view(task.name, view)
    if found is None:
        raise ApiError(404, "unknown_view", f"task {task.name!r} has no view {view!r}")
    store().set_default(task.name, found["id"])
    return redirect(url_for("view_pages.view_page", task_name=task.name, view=found["slug"]), 303)


def _form_weights(task: TaskSpec) -> tuple[dict[str, float], dict[str, float]]:
    """A form's ``weights`` and ``rounds`` (the page's query format), checked as the page
    checks its address (422 ``invalid_weights``)."""
    form = flask.request.form
    try:
        weights = boards.axis_weights(task, form.get("weights") or None).to_dict()
        round_weights = boards.parse_round_weights(task, form.get("rounds") or None)
    except boards.BadWeights as exc:
        raise ApiError(422, "invalid_weights", str(exc)) from None
    for name, value in {**weights, **round_weights}.items():
        if value > MAX_WEIGHT:  # the JSON route's schema bound, for a view saved by form
            raise ApiError(
                422, "invalid_weights", f"the weight of {name!r} is over {MAX_WEIGHT:.0f}"
            )
    return weights, round_weights


view_pages.register_error_handler(ApiError, form_error)


@view_pages.route("/snapshots/<snapshot_id>")
def snapshot_page(snapshot_id: str) -> str | tuple[str, int]:
    """The frozen table, plainly labelled as a snapshot with its date."""
    found = store().snapshot(snapshot_id)
    if found is None or not task_visible(found["task"]):
        return _not_found("There is no snapshot with this id.")
    return render_template(
        "pages/snapshot.html",
        snapshot=found,
        board=found["leaderboard"],
        AXES=AXES,
        live_url=url_for("pages.task_page", task_name=found["task"]),
    )


def _not_found(message: str) -> tuple[str, int]:
    return render_template("pages/not_found.html", message=message), 404
