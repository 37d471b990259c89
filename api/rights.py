"""The rights table: every route, by method and URL rule, with the scope (and role) it needs.

``api.auth`` checks each request against this table before any view runs, and a route the
table does not name is refused (deny by default), so a new route cannot go out unguarded.
The table says who may *call* a route; which objects the caller may touch (whose
submission, which private task, whose view) is the view's own check, through
``api.auth.principal()``.

Scopes are what a credential may do: ``read`` reads what is yours, ``submit`` writes
(submissions, views, snapshots, rounds, webhooks, examples), ``tokens`` manages your own API
tokens, ``admin`` is the operator's. A write never needs less than ``submit`` (or
``tokens`` for your own tokens), and no token is issued, rotated or revoked by a credential
holding fewer scopes than it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType

from store.rules.principals import ADMIN, ADMIN_SCOPE, READ, SUBMIT, TOKENS

PUBLIC, AUTHENTICATED = "public", "authenticated"
LEVELS = (PUBLIC, AUTHENTICATED, READ, SUBMIT, TOKENS, ADMIN_SCOPE)


@dataclass(frozen=True)
class Need:
    """What a request must carry: a scope (or ``public`` / ``authenticated``) and a role."""

    scope: str
    role: str | None = None

    def __post_init__(self) -> None:
        if self.scope not in LEVELS:
            raise ValueError(f"unknown access level {self.scope!r}")


OPEN = Need(PUBLIC)
SIGNED_IN = Need(AUTHENTICATED)
READS = Need(READ)
WRITES = Need(SUBMIT)
MANAGES_TOKENS = Need(TOKENS)
OPERATES = Need(ADMIN_SCOPE, role=ADMIN)
_TASK = "/api/v1/tasks/<task_name>"
_ROUND = f"{_TASK}/rounds/<round_name>"
_MODEL = "/api/v1/submissions/<model_id>"
_HOOK = "/api/v1/webhooks/<webhook_id>"

_TABLE: dict[tuple[str, str], Need] = {
    # the service, its documentation and the entry point
    ("GET", "/"): OPEN,
    ("GET", "/api/v1/health"): OPEN,
    ("GET", "/api/v1/ready"): OPEN,
    ("GET", "/api/v1/openapi.json"): OPEN,
    ("GET", "/static/<path:filename>"): OPEN,
    ("GET", "/static/pages/<path:filename>"): OPEN,
    ("GET", "/metrics"): OPERATES,
    # accounts: signing in and out, who am I, your own tokens, users and task access
    ("POST", "/api/v1/session"): OPEN,
    ("DELETE", "/api/v1/session"): SIGNED_IN,
    ("GET", "/api/v1/me"): SIGNED_IN,
    ("GET", "/api/v1/tokens"): MANAGES_TOKENS,
    ("POST", "/api/v1/tokens"): MANAGES_TOKENS,
    ("DELETE", "/api/v1/tokens/<token_id>"): MANAGES_TOKENS,
    ("POST", "/api/v1/tokens/<token_id>/rotate"): MANAGES_TOKENS,
    ("GET", "/api/v1/users"): OPERATES,
    ("POST", "/api/v1/users"): OPERATES,
    ("PUT", f"{_TASK}/access"): OPERATES,
    # tasks and boards: public reading (a private task is 404 to others: the view's check)
    ("GET", "/api/v1/tasks"): OPEN,
    ("POST", "/api/v1/tasks"): WRITES,  # and an admin's or an author's role (the view)
    ("GET", _TASK): OPEN,
    ("GET", f"{_TASK}/leaderboard"): OPEN,
    ("GET", f"{_TASK}/leaderboard/download"): OPEN,
    ("GET", f"{_TASK}/quota"): READS,
    # submissions: your own, your tasks', or published ones
    ("GET", "/api/v1/submissions"): READS,
    ("GET", f"{_TASK}/submissions"): READS,
    ("POST", f"{_TASK}/submissions"): WRITES,
    ("POST", f"{_TASK}/uploads"): WRITES,
    ("GET", "/api/v1/uploads"): READS,
    ("GET", "/api/v1/uploads/<upload_id>"): READS,
    ("DELETE", "/api/v1/uploads/<upload_id>"): WRITES,
    ("PUT", "/api/v1/uploads/<upload_id>/parts/<int(signed=True):number>"): WRITES,
    ("GET", _MODEL): OPEN,
    ("GET", f"{_MODEL}/scores"): OPEN,
    ("GET", f"{_MODEL}/scores/download"): OPEN,
    ("GET", f"{_MODEL}/results/download"): READS,
    ("GET", f"{_MODEL}/compare/<other_id>"): READS,
    ("POST", f"{_MODEL}/cancel"): WRITES,
    ("POST", f"{_MODEL}/rerun"): WRITES,
    ("PUT", f"{_MODEL}/publication"): WRITES,
    # saved views, the default view and snapshots
    ("GET", f"{_TASK}/views"): OPEN,
    ("POST", f"{_TASK}/views"): WRITES,
    ("GET", "/api/v1/views/<view_id>"): OPEN,
    ("DELETE", "/api/v1/views/<view_id>"): WRITES,
    ("PUT", f"{_TASK}/default-view"): WRITES,
    ("POST", f"{_TASK}/snapshots"): WRITES,
    ("GET", "/api/v1/snapshots/<snapshot_id>"): OPEN,
    # rounds, their datasets and the dynamic loop (a task owner's or an admin's writes)
    ("GET", f"{_TASK}/rounds"): OPEN,
    ("POST", f"{_TASK}/rounds"): WRITES,
    ("PATCH", _ROUND): WRITES,
    ("POST", f"{_ROUND}/datasets"): WRITES,
    ("GET", f"{_ROUND}/collection"): OPEN,
    ("POST", f"{_ROUND}/collection"): WRITES,
    ("POST", f"{_ROUND}/collection/close"): WRITES,
    ("GET", f"{_ROUND}/examples"): OPEN,
    ("POST", f"{_ROUND}/examples"): WRITES,
    ("GET", f"{_ROUND}/examples/export"): READS,
    ("GET", f"{_ROUND}/validation"): READS,
    ("GET", "/api/v1/examples/<example_id>/votes"): READS,
    ("POST", "/api/v1/examples/<example_id>/votes"): WRITES,
    ("POST", "/api/v1/examples/<example_id>/settle"): WRITES,
    ("GET", f"{_ROUND}/vmer"): OPEN,
    ("POST", f"{_ROUND}/freeze"): WRITES,
    ("GET", f"{_ROUND}/adversary"): OPEN,
    ("POST", f"{_ROUND}/adversary"): WRITES,
    # webhooks: a CI job's own (their secrets are shown to their owner)
    ("GET", "/api/v1/webhooks"): WRITES,
    ("POST", "/api/v1/webhooks"): WRITES,
    ("GET", _HOOK): WRITES,
    ("DELETE", _HOOK): WRITES,
    ("GET", f"{_HOOK}/deliveries"): WRITES,
    ("POST", f"{_HOOK}/rotate-secret"): WRITES,
    ("POST", f"{_HOOK}/test"): WRITES,
    # pages: public reading; their forms are writes like the API routes they stand for
    ("GET", "/login"): OPEN,
    ("POST", "/login"): OPEN,
    ("POST", "/logout"): OPEN,
    ("GET", "/tasks/<task_name>"): OPEN,
    ("GET", "/tasks/<task_name>/views/<view>"): OPEN,
    ("POST", "/tasks/<task_name>/views"): WRITES,
    ("POST", "/tasks/<task_name>/views/<view>/default"): WRITES,
    ("POST", "/tasks/<task_name>/snapshots"): WRITES,
    ("GET", "/snapshots/<snapshot_id>"): OPEN,
    ("GET", "/models/<model_id>"): OPEN,
    ("POST", "/models/<model_id>/publication"): WRITES,
    ("GET", "/tasks/<task_name>/rounds/<round_name>"): OPEN,
    ("POST", "/tasks/<task_name>/rounds/<round_name>/votes"): WRITES,
    ("GET", "/tasks/<task_name>/rounds/<round_name>/collect"): OPEN,
    ("POST", "/tasks/<task_name>/rounds/<round_name>/collect"): WRITES,
}
RIGHTS = MappingProxyType(_TABLE)
# The table by rules without their converters (``<int:n>`` as ``<n>``), as OpenAPI paths
# name them.
_CONVERTER = re.compile(r"<[^<>]*:(\w+)>")
_PLAIN = {
    (method, _CONVERTER.sub(r"<\1>", rule)): found for (method, rule), found in _TABLE.items()
}


def need(method: str, rule: str) -> Need | None:
    """What ``method`` on the URL rule ``rule`` needs; None for a route nobody declared."""
    method = "GET" if method == "HEAD" else method
    return RIGHTS.get((method, rule)) or _PLAIN.get((method, rule))


def allows(who_scopes: frozenset[str], who_role: str | None, required: Need) -> bool:
    """Whether a signed-in caller with these scopes and role meets ``required``."""
    if required.role is not None and who_role != required.role:
        return False
    return required.scope == AUTHENTICATED or required.scope in who_scopes
