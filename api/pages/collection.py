"""The page where people write examples for a collection round: a plain form (no script
needed) with the task's input fields and the intended label (QA: the answer), posted to
this blueprint, answered with the live model's answer and whether it was fooled.

The write goes through the same use case as the API (``usecases.collection.writing``), so limits,
checks and storage are the same; the app-wide guard applies the same Origin/CSRF rule as
every other page form, and refusals come back as the form with a sentence."""

from __future__ import annotations

import base64
from typing import Any

from flask import Blueprint, render_template, request
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.wrappers import Response

from api.auth import principal
from api.collection import collection
from api.context import service, task_visible
from api.errors import STATUS, ApiError
from configs.schema import TaskSpec
from metrics.outputs import get_output_type
from store.collection import CollectionRefused, RoundState
from store.rules.principals import SUBMIT
from usecases.collection.examples import MAX_EXPLANATION_CHARS, MAX_SLICE_CHARS
from usecases.collection.writing import write_example

collect_pages = Blueprint("collect_pages", __name__, template_folder="templates")


def _found(task_name: str, round_name: str) -> tuple[TaskSpec, RoundState] | None:
    task = service().tasks.get(task_name)
    if task is None or not task_visible(task_name):
        return None
    state = collection().state(task.name, round_name)
    return None if state is None else (task, state)


def _page(
    found: tuple[TaskSpec, RoundState],
    status: int = 200,
    result: dict[str, Any] | None = None,
    message: str = "",
    sent: dict[str, str] | None = None,
) -> tuple[str, int]:
    task, state = found
    page = render_template(
        "pages/collect.html",
        task=task,
        output=get_output_type(task.output_type),
        round=state,
        may_write=SUBMIT in principal().scopes,
        result=result,
        message=message,
        sent=sent or {},
    )
    return page, status


def _missing(task_name: str, round_name: str) -> tuple[str, int]:
    message = f"Round “{round_name}” of task “{task_name}” is not open for collection."
    return render_template("pages/not_found.html", message=message), 404


@collect_pages.route("/tasks/<task_name>/rounds/<round_name>/collect")
def collect_page(task_name: str, round_name: str) -> tuple[str, int]:
    found = _found(task_name, round_name)
    return _page(found) if found else _missing(task_name, round_name)


@collect_pages.route("/tasks/<task_name>/rounds/<round_name>/collect", methods=["POST"])
def collect_form(task_name: str, round_name: str) -> Response | tuple[str, int]:
    """The page's form (as ``POST /api/v1/tasks/<task>/rounds/<round>/examples``)."""
    found = _found(task_name, round_name)
    if found is None:
        return _missing(task_name, round_name)
    task, _ = found
    # the form's text and each picture within the task's limit; more is a 413 unread
    request.max_content_length = len(task.image_fields) * task.limits.max_input_image_bytes + 2**20
    if (request.content_length or 0) > request.max_content_length:
        raise RequestEntityTooLarge()  # refused by its length, before any of it is read
    sent = {key: value for key, value in request.form.items()}
    try:
        result = write_example(service(), task, round_name, _body(task, sent), _author())
    except CollectionRefused as exc:
        return _page(
            _found(task_name, round_name) or found,
            STATUS[exc.kind],
            message=_sentence(exc.message),
            sent=sent,
        )
    return _page(_found(task_name, round_name) or found, 201, result=result)


def _author() -> str:
    return principal().user_id or ""


def _body(task: TaskSpec, form: dict[str, str]) -> dict[str, Any]:
    """The form as the API's JSON body; a QA answer without a start is found in the context."""
    inputs = {name: form.get(f"input_{name}", "") for name in task.input_fields}
    for name in task.image_fields:  # a file the writer picked, as the API's base64 text
        inputs[name] = _uploaded_image(name, task.limits.max_input_image_bytes)
    body: dict[str, Any] = {"inputs": inputs}
    explanation = form.get("explanation", "").strip()
    if len(explanation) > MAX_EXPLANATION_CHARS:
        raise CollectionRefused(
            "invalid", "invalid_example", f"explanation: at most {MAX_EXPLANATION_CHARS} characters"
        )
    if explanation:
        body["explanation"] = explanation
    slices = {c: form.get(f"slice_{c}", "").strip() for c in task.slices}
    if any(slices.values()):
        body["slices"] = {c: v[:MAX_SLICE_CHARS] for c, v in slices.items() if v}
    output = get_output_type(task.output_type)
    if output.form == "span":
        answer = form.get("answer", "")
        body["answer"] = answer
        body["answer_start"] = inputs.get("context", "").find(answer) if answer else None
    elif output.form == "list":
        lines = [line.strip() for line in form.get(output.extra_gold_fields[0], "").splitlines()]
        body[output.extra_gold_fields[0]] = [line for line in lines if line] or None
    else:
        body[task.output_key] = form.get(task.output_key) or None
    return body


def _uploaded_image(field: str, max_bytes: int) -> str:
    """The picked file of image field ``field`` as base64, read no further than the limit
    (the use case checks the rest: format, size, damage)."""
    upload = request.files.get(f"input_{field}")
    if upload is None or not upload.filename:
        raise CollectionRefused(
            "invalid", "invalid_example", f"inputs.{field}: choose a PNG or JPEG file"
        )
    data = upload.stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise CollectionRefused(
            "invalid", "invalid_example", f"inputs.{field}: at most {max_bytes} bytes"
        )
    return base64.b64encode(data).decode("ascii")


def _sentence(text: str) -> str:
    text = text[:1].upper() + text[1:]
    return text if text.endswith(".") else text + "."


def _form_error(exc: ApiError) -> tuple[str, int, dict[str, str]]:
    """A refusal on this page (no login, a foreign origin, too many writes) as a sentence."""
    message = (
        "Sign in first: writing examples needs an account."
        if exc.status == 401
        else (_sentence(exc.message))
    )
    page = render_template("pages/not_found.html", heading="Not done", message=message)
    return page, exc.status, exc.headers


collect_pages.register_error_handler(ApiError, _form_error)


@collect_pages.errorhandler(RequestEntityTooLarge)
def _too_large(exc: RequestEntityTooLarge) -> tuple[str, int]:
    """A form over the route's limit (a picture far too large) as a page with a sentence."""
    limit = request.max_content_length
    message = "The form is too large" + (
        f" (at most {limit // 1024} KiB in all, its picture within the task's limit)."
        if limit
        else "."
    )
    return render_template("pages/not_found.html", heading="Not done", message=message), 413
