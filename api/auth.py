"""Who asks, and may they: the Host allow-list, credentials, per-route access levels and
the cross-site check for cookie sessions.

Every view declares its level with ``access(...)``; a request to a view without one is
refused (deny by default), so a new route cannot go out unguarded. Object-level checks
(whose submission, which private task) are the views' own, through ``principal()``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from flask import Flask, current_app, g, request
from flask_smorest import Blueprint

from api.errors import ApiError
from store.accounts import SESSION, Accounts, AuthFailure, csrf_token
from store.principals import ADMIN_SCOPE, ANONYMOUS, READ, SUBMIT, Principal

F = TypeVar("F", bound=Callable[..., Any])
PUBLIC, AUTHENTICATED = "public", "authenticated"
LEVELS = (PUBLIC, AUTHENTICATED, READ, SUBMIT, ADMIN_SCOPE)
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
SESSION_COOKIE = "dynaeval_session"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Endpoints outside our blueprints: the OpenAPI document and the redirect to the tasks.
PUBLIC_ENDPOINTS = frozenset({"index", "api-docs.openapi_json", "static"})
SECURITY_SCHEMES = {
    "bearerAuth": {"type": "http", "scheme": "bearer", "description": "an API token"},
    "sessionCookie": {"type": "apiKey", "in": "cookie", "name": SESSION_COOKIE},
}
_SIGNED_IN: list[dict[str, list[str]]] = [{"bearerAuth": []}, {"sessionCookie": []}]


def access(blp: Blueprint, level: str) -> Callable[[F], F]:
    """Mark a view with the access level it needs and document it in OpenAPI."""
    if level not in LEVELS:
        raise ValueError(f"unknown access level {level!r}")

    def decorate(func: F) -> F:
        func._dynaeval_access = level  # type: ignore[attr-defined]
        # A public route still reads credentials (a private task's owner sees it).
        security = [{}, *_SIGNED_IN] if level == PUBLIC else _SIGNED_IN
        return blp.doc(security=security)(func)

    return decorate


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


def _guard() -> None:
    _check_host()
    if request.endpoint is None:  # no such route: Flask answers 404/405 itself
        return
    g.principal = _authenticate()
    level = _level(request.endpoint)
    _check_origin(g.principal)
    _check_level(g.principal, level)


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


def _level(endpoint: str) -> str:
    """The access level the view of ``endpoint`` declared; views without one are refused."""
    if endpoint in PUBLIC_ENDPOINTS or request.method == "OPTIONS":
        return PUBLIC  # Flask answers OPTIONS itself (the Allow header), no view runs
    view: Any = current_app.view_functions[endpoint]
    view_class = getattr(view, "view_class", None)
    if view_class is not None:
        method = "get" if request.method == "HEAD" else request.method.lower()
        view = getattr(view_class, method, None)
    level = getattr(view, "_dynaeval_access", None)
    if level is None:
        # Deny by default: a route nobody guarded answers as if it did not exist.
        raise ApiError(404, "not_found", "no such route")
    return str(level)


def _check_level(who: Principal, level: str) -> None:
    if level == PUBLIC:
        return
    if not who.authenticated:
        raise _unauthenticated(
            "unauthenticated",
            "this route needs an API token ('Authorization: Bearer <token>') or a login",
        )
    if level != AUTHENTICATED and level not in who.scopes:
        raise ApiError(403, "insufficient_scope", f"this route needs the {level!r} scope")


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
