"""Who asks, and may they: the Host allow-list, credentials, the rights table
(``api.rights``) and the cross-site check for cookie sessions.

Every request is checked against the one declared table of route -> scope and role; a route
the table does not name is refused (deny by default), so a new route cannot go out
unguarded. Object-level checks (whose submission, which private task) are the views' own,
through ``principal()``."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from apispec import APISpec
from flask import Flask, current_app, g, request

from api.errors import ApiError
from api.rights import AUTHENTICATED, PUBLIC, Need, allows, need
from store.accounts import SESSION, Accounts, AuthFailure, csrf_token
from store.rules.principals import ANONYMOUS, Principal

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
SESSION_COOKIE = "dynaeval_session"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SECURITY_SCHEMES = {
    "bearerAuth": {"type": "http", "scheme": "bearer", "description": "an API token"},
    "sessionCookie": {"type": "apiKey", "in": "cookie", "name": SESSION_COOKIE},
}
_SIGNED_IN: list[dict[str, list[str]]] = [{"bearerAuth": []}, {"sessionCookie": []}]


def document_rights(spec: APISpec) -> None:
    """Write each operation's security, and the scope it needs, into the OpenAPI document
    from the rights table (the one place they are declared)."""
    paths: dict[str, dict[str, Any]] = spec._paths  # apispec keeps no public handle on them
    for path, operations in paths.items():
        rule = re.sub(r"\{(\w+)\}", r"<\1>", path)
        for method, operation in operations.items():
            required = need(method.upper(), rule)
            if required is None or not isinstance(operation, dict):
                continue
            # A public route still reads credentials (a private task's owner sees it).
            operation["security"] = [{}, *_SIGNED_IN] if required.scope == PUBLIC else _SIGNED_IN
            operation["x-required-scope"] = required.scope
            if required.role is not None:
                operation["x-required-role"] = required.role
            _document_refusals(operation.setdefault("responses", {}), required)


def _document_refusals(responses: dict[str, Any], required: Need) -> None:
    """The 401 and 403 answers the table's check can give, where the view did not say."""
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    if required.scope != PUBLIC:
        responses.setdefault("401", {"description": "unauthenticated"} | error)
    if required.scope not in (PUBLIC, AUTHENTICATED):
        wanted = f"the {required.scope!r} scope" + (
            f" and the {required.role!r} role" if required.role else ""
        )
        responses.setdefault("403", {"description": f"insufficient_scope: needs {wanted}"} | error)


def principal() -> Principal:
    """The principal of the current request (anonymous when no credentials came)."""
    found: Principal = g.get("principal", ANONYMOUS)
    return found


def install(app: Flask, allowed_hosts: Iterable[str] | None = None) -> None:
    """Check every request's Host, credentials, access level and origin before its view."""
    app.config["DYNAEVAL_ALLOWED_HOSTS"] = tuple(
        h.lower() for h in (allowed_hosts if allowed_hosts is not None else LOOPBACK_HOSTS)
    )
    app.before_request(_guard)


def allow_hosts(app: Flask, hosts: Iterable[str]) -> None:
    """Replace the Host allow-list (``serve`` knows its port only once it is bound)."""
    app.config["DYNAEVAL_ALLOWED_HOSTS"] = tuple(h.lower() for h in hosts)


def accounts() -> Accounts:
    service = current_app.extensions["dynaeval"]
    return Accounts(service.db, service.clock)


# The probes answer whatever Host and credentials a load balancer or an orchestrator sends:
# it addresses a node by its IP, and a stale token in a probe must not take a node out of
# service. They reveal nothing a rebinding page could use (a status, the job counts).
PROBES = frozenset({"v1.health", "v1.ready"})


def _guard() -> None:
    if request.endpoint in PROBES:
        return  # anonymous (principal()), as every caller of an open route may be
    _check_host()
    if request.endpoint is None:  # no such route: Flask answers 404/405 itself
        return
    g.principal = _authenticate()
    required = _required()
    _check_origin(g.principal)
    _check_need(g.principal, required)


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    """``host`` (``name[:port]``) matches an entry with the same name and either the same
    port or no port."""
    name, port = _split_host(host)
    for entry in allowed:
        entry_name, entry_port = _split_host(entry)
        if name == entry_name and entry_port in (None, port):
            return True
    return False


def _split_host(host: str) -> tuple[str, str | None]:
    """``("[::1]", "8000")`` from ``[::1]:8000``, ``("localhost", None)`` from ``localhost``."""
    host = host.strip().lower()
    if host.startswith("["):
        name, _, rest = host.partition("]")
        return name + "]", rest[1:] if rest.startswith(":") else None
    name, colon, port = host.partition(":")
    return name, port if colon else None


def _check_host() -> None:
    # A DNS-rebinding page reaches us under its own name: only names we serve are answered.
    if not host_allowed(request.host, current_app.config["DYNAEVAL_ALLOWED_HOSTS"]):
        raise ApiError(
            421,
            "host_not_allowed",
            f"this server does not answer for host {request.host!r}; "
            "add it with --allowed-host or DYNAEVAL_ALLOWED_HOSTS",
        )


def _authenticate() -> Principal:
    """A Bearer token (401 when it is bad), else a session cookie, else anonymous."""
    header = request.headers.get("Authorization")
    if header is not None:
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise _unauthenticated(
                "unauthenticated", "send an API token as 'Authorization: Bearer <token>'"
            )
        try:
            return accounts().authenticate(secret.strip())
        except AuthFailure as exc:
            raise _unauthenticated(exc.code, exc.message) from None
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        try:
            return accounts().authenticate(cookie, kind=SESSION)
        except AuthFailure:
            return ANONYMOUS  # an old session cookie is as good as none
    return ANONYMOUS


def _required() -> Need:
    """What the rights table says this request's route needs; undeclared routes are refused."""
    if request.method == "OPTIONS":
        return Need(PUBLIC)  # Flask answers OPTIONS itself (the Allow header), no view runs
    rule = request.url_rule.rule if request.url_rule is not None else ""
    required = need(request.method, rule)
    if required is None:
        # Deny by default: a route nobody declared answers as if it did not exist.
        raise ApiError(404, "not_found", "no such route")
    return required


def _check_need(who: Principal, required: Need) -> None:
    if required.scope == PUBLIC:
        return
    if not who.authenticated:
        raise _unauthenticated(
            "unauthenticated",
            "this route needs an API token ('Authorization: Bearer <token>') or a login",
        )
    if not allows(who.scopes, who.role, required):
        wanted = f"the {required.scope!r} scope"
        if required.role is not None:
            wanted += f" and the {required.role!r} role"
        raise ApiError(403, "insufficient_scope", f"this route needs {wanted}")


def _check_origin(who: Principal) -> None:
    """Writes a browser could send on its own (cookies) must come from our own pages: a
    foreign Origin is refused, and a session write needs our Origin or its CSRF token. A
    Bearer token is never attached by a browser on its own, so it needs neither."""
    if request.method in SAFE_METHODS or who.via == "token":
        return
    origin = request.headers.get("Origin")
    if origin is not None and not _same_site(origin):
        raise ApiError(403, "cross_site_refused", f"cross-site write from {origin!r} refused")
    if who.via == SESSION and origin is None:
        cookie = request.cookies.get(SESSION_COOKIE, "")
        if request.headers.get(CSRF_HEADER) != csrf_token(cookie):
            raise ApiError(
                403,
                "cross_site_refused",
                f"a write with a session cookie needs our Origin or the {CSRF_HEADER} header",
            )


def _same_site(origin: str) -> bool:
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False
    return parts.netloc.lower() == request.host.lower() and host_allowed(
        parts.netloc, current_app.config["DYNAEVAL_ALLOWED_HOSTS"]
    )


def _unauthenticated(code: str, message: str) -> ApiError:
    return ApiError(401, code, message)
