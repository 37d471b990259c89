"""HTML pages: the task list, a task's leaderboard, a model's public results.

Everything a page shows is on the page (no CDN, no fetch at load): the leaderboard is
rendered on the server for the weights in the URL, from the API's own computation, and the
page's script re-ranks it in the browser as the viewer moves the sliders.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flask import (
    Blueprint,
    jsonify,
    redirect,
    render_template,
    request,
    send_from_directory,
    url_for,
)
from markupsafe import Markup
from werkzeug.wrappers import Response

from api import accounts as session_routes
from api.auth import accounts, principal
from api.context import service, task_visible
from api.errors import ApiError, error_body
from api.pages.visibility import (
    decide_publication,
    model_private_visible,
    openable_models,
    readable_model,
)
from api.ratelimit import login_limited
from configs.schema import TaskSpec
from configs.vocabulary.axes import AXES
from configs.vocabulary.images import data_uri
from dynascore.weights import Weights
from store.rules.principals import ModelAccess
from store.stats import TaskQueue, task_queues
from usecases.boards import assemble as boards
from usecases.boards import page as boards_page
from usecases.boards import public
from usecases.boards.assemble import METRIC_LABELS
from usecases.boards.default_view import task_defaults
from usecases.boards.examples import example_predictions
from usecases.boards.page import board as weighted_board

STATIC = Path(__file__).resolve().parent / "static"
pages = Blueprint("pages", __name__, template_folder="templates")

AXIS_LABELS = {
    "performance": "Performance",
    "throughput": "Throughput",
    "memory": "Memory",
    "robustness": "Robustness",
    "fairness": "Fairness",
}
AXIS_UNITS = {
    "performance": "0–100",
    "throughput": "examples/s",
    "memory": "GiB",
    "robustness": "0–100",
    "fairness": "0–100",
}


@pages.app_template_filter("num")
def num(value: Any, digits: int = 1) -> str:
    """A number for people: fixed decimals, thousands separated; '—' when absent."""
    if not isinstance(value, int | float) or value != value:
        return "—"
    if abs(value) >= 1e6:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


@pages.app_template_filter("weight")
def weight_label(value: float) -> str:
    """A weight as the ranking uses it: one decimal on the sliders' 0.1 grid, every digit
    otherwise (0.25 was shown as "0.2"); the script's ``weightLabel`` says it alike."""
    tenths = value * 10
    if abs(tenths - round(tenths)) < 1e-9 and abs(value) < 1e6:
        return f"{value:.1f}"
    return repr(float(value)) if abs(value) < 1e6 else f"{value:,.0f}"


@pages.app_template_filter("label_of")
def label_of(metric: str) -> str:
    """A metric's name as a column shows it."""
    return METRIC_LABELS.get(metric, metric)


@pages.app_template_filter("tojson_script")
def tojson_script(value: Any) -> Markup:
    """JSON safe inside a <script type="application/json"> element."""
    return script_json(json.dumps(value, allow_nan=False))


def script_json(text: str) -> Markup:
    """JSON text made safe inside a <script type="application/json"> element."""
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


pages.add_app_template_filter(data_uri, "image_src")


@pages.app_context_processor
def _labels() -> dict[str, Any]:
    return {
        "AXES": AXES,
        "AXIS_LABELS": AXIS_LABELS,
        "AXIS_UNITS": AXIS_UNITS,
        "METRIC_LABELS": METRIC_LABELS,
    }


@pages.app_context_processor
def _viewer() -> dict[str, Any]:
    """Who is signed in, for every page's header (anonymous when nobody is)."""
    here = request.full_path.rstrip("?")
    if request.path == "/login":  # signing in from the login page goes where it was going
        here = local_path(request.values.get("next"))
    return {"viewer": principal(), "here": here}


def task_list() -> str:
    """Every task with its rounds, metric, number of scored models and last update."""
    updated = _last_updates()
    queues = task_queues(service().db, service().clock.now())
    scored = service().queries.scored_models()  # a count, not every model's rows
    tasks = []
    for task in service().tasks.values():
        if not task_visible(task.name):
            continue
        queue = queues.get(task.name, TaskQueue())
        tasks.append(
            {
                "name": task.name,
                "description": task.description,
                "rounds": [spec.name for spec in task.rounds],
                "metric": task.metric,
                "models": scored.get(task.name, 0),
                "updated": updated.get(task.name),
                "queued": queue.queued,
                "running": queue.running,
                "oldest_wait": _wait_text(queue.oldest_wait_s),
                "waiting": queue.oldest_wait_s > 0,  # a job ready to run (not a back-off)
            }
        )
    return render_template("pages/tasks.html", tasks=tasks)


def _wait_text(seconds: float) -> str:
    """A wait for people: "40 s", "12 min", "3.5 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _last_updates() -> dict[str, str]:
    found = service().queries.last_result_times()
    return {task: moment.strftime("%Y-%m-%d %H:%M UTC") for task, moment in found.items()}


@pages.route("/static/pages/<path:filename>")
def static(filename: str) -> Any:
    """The pages' scripts and style sheet (shipped in the package, never a CDN)."""
    return send_from_directory(STATIC, filename, max_age=300)


@pages.route("/tasks/<task_name>")
def task_page(task_name: str) -> Any:
    found = service().tasks.get(task_name)
    if found is None or not task_visible(task_name):
        return _not_found(f"There is no task called “{task_name}”.")
    defaults = task_defaults(service(), found)  # a default view's weights, if it has one
    task = defaults.task
    error = ""
    try:
        weights = boards.axis_weights(task, _weights_query(task))
        # The view's rounds only when the address names no weights: the script writes
        # ``rounds`` only when they differ from the task's own.
        round_weights = boards.requested_round_weights(
            task, defaults.round_weights, _rounds_query(task), _weights_query(task)
        )
    except boards.BadWeights as exc:
        error = str(exc)
        weights = boards.axis_weights(task, None)
        round_weights = defaults.round_weights or boards.default_round_weights(task)
    return board_page("pages/leaderboard.html", task, weights, round_weights, error=error)


def board_page(
    template: str,
    task: TaskSpec,
    weights: Weights,
    round_weights: dict[str, float],
    error: str = "",
    **extra: Any,
) -> tuple[str, int]:
    """A leaderboard page for these weights (the task page, and a saved view's page): one
    page of the ranking written (``?page=``), every row in the script's data."""
    board = weighted_board(service(), task, weights, round_weights)
    data = boards_page.page_data(
        service(), task, weights, round_weights, openable=openable_models(task.name)
    )
    query = _query(weights.to_dict(), round_weights, task)
    notes = {
        "rank_notes": rank_notes(board),  # the API's rank intervals, for these weights only
        "rank_notes_for": "&".join(f"{k}={v}" for k, v in query.items()),
        "condition_groups": boards.condition_marks(board),  # marks only on mixed boards
        "page_rows": boards_page.PAGE_ROWS,  # a ?page= link's rows, for the script
        # a saved view's page: the view's own address while its weights are shown, the
        # task's board with the weights once a slider moves (the view ignores ?weights=)
        "view_path": extra.get("view_url"),
        "board_path": url_for("pages.task_page", task_name=task.name),
    }
    fields = {**data.fields, **notes}
    queue = task_queues(service().db, service().clock.now()).get(task.name, TaskQueue())
    rows = boards_page.RowPage.of(len(board["models"]), _page_number())
    asked = request.args.get("page")
    return render_template(
        template,
        task=task,
        board=board,
        rows=rows,
        shown=board["models"][rows.start : rows.stop],
        pending={"queued": queue.queued, "running": queue.running},
        # ranks two models share, counted once (a filter per row was quadratic in models)
        tied_ranks={
            rank for rank, n in Counter(m["rank"] for m in board["models"]).items() if n > 1
        },
        data=fields,
        data_script=script_json(boards_page.PageData(fields, data.models_json).to_json()),
        openable=frozenset(data.fields["openable"]),
        error=error,
        shares=_shares(board, weights.to_dict()),
        query=query,
        page_links=_page_links(rows, query, request.view_args or {}),
        # a ?page= that is not the page shown (not a number, or out of range) is said so
        page_moved=asked is not None and asked != str(rows.number),
        downloads=_downloads(task, query),
        huge=_huge(board),
        **extra,
    ), (400 if error else 200)


def _page_number() -> int:
    """``?page=N`` (1-based, ASCII digits; past the end is the last page); anything else
    is the first page. (``str.isdigit`` alone takes "²" and "３", which ``int`` refuses or
    reads as another number.)"""
    text = request.args.get("page", "")
    if not (text.isascii() and text.isdigit()):
        return 1
    return int(text) if len(text) <= 9 else 10**9


def _page_links(
    rows: boards_page.RowPage, query: dict[str, str], args: dict[str, Any]
) -> dict[str, str]:
    """The addresses of the first, previous, next and last pages, keeping the weights."""
    if rows.pages == 1:
        return {}
    numbers = {"first": 1, "previous": rows.number - 1, "next": rows.number + 1, "last": rows.pages}
    endpoint = request.endpoint or "pages.task_page"
    return {
        name: url_for(endpoint, **{**args, **query, "page": n}) + "#leaderboard"
        for name, n in numbers.items()
        if 1 <= n <= rows.pages and n != rows.number
    }


def _weights_query(task: TaskSpec) -> str | None:
    """``?weights=axis:n,...``, or the no-script form's ``w_<axis>`` fields."""
    fields = {axis: request.args.get(f"w_{axis}") for axis in AXES}
    if any(v is not None for v in fields.values()):
        return ",".join(f"{a}:{v}" for a, v in fields.items() if v is not None)
    return request.args.get("weights")


def _rounds_query(task: TaskSpec) -> str | None:
    fields = {spec.name: request.args.get(f"r_{spec.name}") for spec in task.rounds}
    if any(v is not None for v in fields.values()):
        return ",".join(f"{r}:{v}" for r, v in fields.items() if v is not None)
    return request.args.get("rounds")


def _query(
    weights: dict[str, float], round_weights: dict[str, float], task: TaskSpec
) -> dict[str, str]:
    query = {"weights": boards.weights_text(weights)}
    if round_weights != boards.default_round_weights(task):
        query["rounds"] = boards.weights_text(round_weights)
    return query


def _downloads(task: TaskSpec, query: dict[str, str]) -> dict[str, str]:
    values: dict[str, Any] = {"task_name": task.name, **query}
    return {
        fmt: url_for("downloads.leaderboard_download", format=fmt, **values)
        for fmt in ("csv", "json")
    }


def _shares(board: Mapping[str, Any], weights: dict[str, float]) -> dict[str, float]:
    """The normalised weights the Dynascore used (axes with a usable AMRS)."""
    amrs = board.get("amrs") or {}
    kept = {a: w for a, w in weights.items() if w > 0 and (amrs.get(a) or 0) > 0}
    total = sum(kept.values())
    return {a: w / total for a, w in kept.items()} if total else {}


def rank_notes(board: Mapping[str, Any]) -> dict[str, str]:
    """``model id -> "2–5"``, the 95 % rank interval, for the models whose rank is uncertain
    (the API's ``rank_interval``); a model whose interval is its rank has no note."""
    notes = {}
    for model in board.get("models") or []:
        best, worst = model.get("rank_interval") or (None, None)
        if best is not None and worst is not None and best != worst:
            notes[model["model_id"]] = f"{best}–{worst}"
    return notes


def _huge(board: Mapping[str, Any]) -> bool:
    return any(abs(m["dynascore"]) >= 1000 for m in board.get("models") or [])


@pages.route("/models/<model_id>")
def model_page(model_id: str) -> Any:
    """A scored model's page; to its submitter, the task's owner and admins also its newest
    job (a failure's reason and log tail), and the page of a model not scored yet."""
    access = readable_model(model_id)
    found = public.model_results(service(), model_id) if access is not None else None
    submission = _private_submission(model_id, access)
    if found is None and submission is not None:
        return render_template("pages/submission.html", submission=submission)
    if found is None or access is None:
        known = accounts().model_publication(model_id)
        if known is not None and task_visible(known.task) and not known.published:
            return _not_found(
                "This model's results are not published: its submitter (or an admin) can "
                "publish them from the model's page or when submitting."
            )
        return _not_found("There is no scored model with this id (only scored models have a page).")
    task = service().tasks.get(found["task"])
    return render_template(
        "pages/model.html",
        model=found,
        job=(submission or {}).get("job"),
        task=task,
        view=public.model_view(found),
        shown=example_predictions(service(), task, model_id) if task else [],
        published=access.published,
        may_publish=principal().may_publish(access),
        downloads={
            fmt: url_for("downloads.scores_download", model_id=model_id, format=fmt)
            for fmt in ("csv", "json")
        },
    )


def _private_submission(model_id: str, access: ModelAccess | None) -> dict[str, Any] | None:
    """The submission with its newest job, for those who may see its failures; else None."""
    if access is None or not model_private_visible(access):
        return None
    return service().queries.submission(model_id, show_internal=principal().is_admin)


@pages.route("/models/<model_id>/publication", methods=["POST"])
def publish_form(model_id: str) -> Response:
    """The model page's publish / unpublish button (as ``PUT .../publication``)."""
    decide_publication(model_id, request.form.get("published") == "true")
    return redirect(url_for("pages.model_page", model_id=model_id), 303)


# -- signing in and out ----------------------------------------------------------------------
@pages.route("/login")
def login_page() -> tuple[str, int]:
    return _login_form("", 200)


@pages.route("/login", methods=["POST"])
@login_limited
def login_form() -> Response | tuple[str, int]:
    """Sign in with the form: the API's login (``POST /api/v1/session``), cookie and all,
    then back to ``next``. A wrong password is the form again with a sentence."""
    name, password = request.form.get("name", ""), request.form.get("password", "")
    if not name or not password:
        return _login_form("Enter your user name and password.", 400)
    _, secret = session_routes.sign_in(name[:64], password[:1024])
    response = redirect(local_path(request.form.get("next")), 303)
    session_routes.set_session_cookie(response, secret)
    return response


@pages.route("/logout", methods=["POST"])
def logout_form() -> Response:
    return session_routes.sign_out(redirect(local_path(request.form.get("next")), 303))


def local_path(target: str | None) -> str:
    """``target`` if it is a path on this site, else ``/``: no redirect to another site
    (``//host``, a scheme, or a backslash browsers read as a slash)."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return "/"
    if "\\" in target or any(ord(c) < 32 or ord(c) == 127 for c in target):
        return "/"
    return target


def _login_form(message: str, status: int) -> tuple[str, int]:
    target = local_path(request.values.get("next"))
    return render_template("pages/login.html", message=message, next=target), status


# Form posts answer their errors as a page with a sentence, not as JSON.
FORM_ENDPOINTS = frozenset(
    {
        "pages.login_form",
        "pages.logout_form",
        "pages.publish_form",
        "view_pages.snapshot_form",
        "view_pages.view_form",
        "view_pages.default_form",
    }
)


def form_error(exc: ApiError) -> Any:
    """An error met by a form post (its own, or the guard's: a refused origin, a rate
    limit, no login) as a sentence on a page; other routes keep the JSON error."""
    if request.endpoint not in FORM_ENDPOINTS:
        return jsonify(error_body(exc.code, exc.message)), exc.status, exc.headers
    if request.endpoint == "pages.login_form":
        message = _LOGIN_SENTENCES.get(exc.code, exc.message)
        page, status = _login_form(message, exc.status)
        return page, status, exc.headers
    page = render_template("pages/not_found.html", heading="Not done", message=_sentence(exc))
    return page, exc.status, exc.headers


_LOGIN_SENTENCES = {"invalid_credentials": "Wrong user name or password."}


def _sentence(exc: ApiError) -> str:
    if exc.status == 401:
        return "Sign in first: this needs an account."
    text = exc.message[:1].upper() + exc.message[1:]
    return text if text.endswith(".") else text + "."


pages.register_error_handler(ApiError, form_error)


def _not_found(message: str) -> tuple[str, int]:
    return render_template("pages/not_found.html", message=message), 404
