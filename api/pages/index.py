"""``/``: the task list page for a browser, or the API's task list for a client."""

from __future__ import annotations

from flask import redirect, request
from werkzeug.wrappers import Response

from api.pages.site import task_list


def index() -> Response | str:
    """``/``: the task list page for a browser; API clients (asking for JSON, for anything,
    or for nothing in particular) are redirected to ``/api/v1/tasks`` as before."""
    best = request.accept_mimetypes.best_match(["application/json", "text/html"])
    if best == "text/html":
        return task_list()
    return redirect("/api/v1/tasks")
