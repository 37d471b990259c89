"""REST API v1 for accounts: the page login (session), who am I, API tokens (create, list,
revoke, rotate: each user their own), users and task access (admins)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask import current_app, jsonify, request
from flask.views import MethodView
from marshmallow import Schema, fields, validate
from werkzeug.wrappers import Response

from api.auth import (
    SESSION_COOKIE,
    accounts,
    host_allowed,
    principal,
)
from api.bodies import Blueprint
from api.docs import error_docs, success_docs
from api.errors import ApiError
from api.pages.visibility import decide_publication
from api.ratelimit import login_limited
from api.schemas import FullMatch
from configs.vocabulary.scopes import MAX_TOKEN_DAYS
from store.accounts import NAME as USER_NAME
from store.accounts import (
    SESSION,
    AccountError,
    IssuedToken,
    TokenInfo,
    UserInfo,
    csrf_token,
)
from store.rules.principals import DEFAULT_TOKEN_SCOPES, ROLE_SCOPES, ROLES, SCOPES, Principal
from usecases.evaluations import rerun as rerun_submission

SESSION_HOURS = 12
blp = Blueprint("accounts", __name__, url_prefix="/api/v1", description="Accounts and tokens")
ERRORS = {
    400: "bad_json: the body is not a JSON object",
    401: "unauthenticated, token_expired, token_revoked or invalid_credentials",
    403: "insufficient_scope, scope_not_allowed, not_task_owner, not_owner or cross_site_refused",
    404: "unknown_token, unknown_task, unknown_user or unknown_submission",
    409: "user_exists, or already_queued (the submission has a job waiting or running)",
    422: "a field out of range: invalid_scopes, invalid_name, invalid_role, weak_password",
}


errors = error_docs(blp, ERRORS)


ok = success_docs(blp)


# -- schemas ---------------------------------------------------------------------------------
class LoginSchema(Schema):
    name = fields.String(required=True, validate=validate.Length(min=1, max=64))
    password = fields.String(required=True, validate=validate.Length(min=1, max=1024))


class MeSchema(Schema):
    id = fields.String()
    name = fields.String()
    role = fields.String()
    scopes = fields.List(fields.String())
    via = fields.String()
    owned_tasks = fields.List(fields.String())
    csrf_token = fields.String(metadata={"description": "send as X-CSRF-Token on writes"})


class LogoutSchema(Schema):
    status = fields.String()


class TokenCreateSchema(Schema):
    name = fields.String(required=True, validate=validate.Length(min=1, max=128))
    scopes = fields.List(
        fields.String(validate=validate.OneOf(SCOPES)),
        load_default=lambda: list(DEFAULT_TOKEN_SCOPES),
        validate=validate.Length(min=1),
    )
    # Bounded: a date past year 9999 cannot be stored (it was a 500); ten years is plenty.
    expires_in_days = fields.Float(
        load_default=None,
        allow_none=True,
        validate=validate.Range(min=0, min_inclusive=False, max=MAX_TOKEN_DAYS),
    )


class TokenSchema(Schema):
    id = fields.String()
    name = fields.String()
    prefix = fields.String()
    scopes = fields.List(fields.String())
    state = fields.String(metadata={"description": "active, revoked or expired"})
    created_at = fields.String()
    expires_at = fields.String(allow_none=True)
    revoked_at = fields.String(allow_none=True)
    last_used_at = fields.String(allow_none=True)


class IssuedTokenSchema(TokenSchema):
    token = fields.String(metadata={"description": "the secret: shown this once"})


class TokenListSchema(Schema):
    tokens = fields.List(fields.Nested(TokenSchema))


class UserCreateSchema(Schema):
    # as store.accounts checks it: the schema promises no name the server refuses
    name = fields.String(
        required=True, validate=FullMatch(USER_NAME.pattern, error="1-64 of A-Z a-z 0-9 _ . @ -")
    )
    role = fields.String(load_default="researcher", validate=validate.OneOf(ROLES))
    password = fields.String(
        load_default=None, allow_none=True, validate=validate.Length(min=8, max=1024)
    )


class UserSchema(Schema):
    id = fields.String()
    name = fields.String()
    role = fields.String()
    has_password = fields.Boolean()
    created_at = fields.String()


class UserListSchema(Schema):
    users = fields.List(fields.Nested(UserSchema))


class TaskAccessSchema(Schema):
    owner = fields.String(load_default=None, allow_none=True)
    private = fields.Boolean(load_default=False)


class TaskAccessOutSchema(Schema):
    task = fields.String()
    owner_id = fields.String(allow_none=True)
    private = fields.Boolean()


def _refused(exc: AccountError) -> ApiError:
    status = {
        "user_exists": 409,
        "unknown_user": 404,
        "unknown_task": 404,
        "scope_not_allowed": 403,
    }.get(exc.code, 422)
    return ApiError(status, exc.code, exc.message)


# -- session ---------------------------------------------------------------------------------
@blp.route("/session")
class SessionView(MethodView):
    @login_limited
    @ok(MeSchema)
    @errors(401, 403, 422)
    @blp.arguments(LoginSchema, as_kwargs=True)
    def post(self, name: str, password: str) -> Response:
        """Log in with a password: sets an HttpOnly session cookie; writes made with it need
        our Origin or the returned csrf_token in X-CSRF-Token. Logins are rate-limited per
        client address (429 ``rate_limited`` with Retry-After)."""
        who, secret = sign_in(name, password)
        response = jsonify(_me(who) | {"csrf_token": csrf_token(secret)})
        set_session_cookie(response, secret)
        return response

    @ok(LogoutSchema)
    @errors(401, 403)
    def delete(self) -> Response:
        """Log out: the session is revoked and its cookie cleared."""
        return sign_out(jsonify({"status": "logged_out"}))


def sign_in(name: str, password: str) -> tuple[Principal, str]:
    """A new session for a user's password (the API's and the login page's one way in):
    the principal and the session secret; 401 ``invalid_credentials`` otherwise."""
    store = accounts()
    user_id = store.check_password(name, password)
    user = store.user_by_name(name) if user_id is not None else None
    if user_id is None or user is None:
        raise ApiError(401, "invalid_credentials", "wrong user name or password")
    issued = store.create_token(
        user_id,
        "login",
        sorted(ROLE_SCOPES[user["role"]]),
        expires_at=store.clock.now() + timedelta(hours=SESSION_HOURS),
        kind=SESSION,
    )
    return store.authenticate(issued.secret, kind=SESSION), issued.secret


def set_session_cookie(response: Response, secret: str) -> None:
    """The session cookie: HttpOnly, SameSite=Lax, Secure except over loopback http."""
    response.set_cookie(
        SESSION_COOKIE,
        secret,
        max_age=SESSION_HOURS * 3600,
        secure=not _loopback_http(),
        httponly=True,
        samesite="Lax",
        path="/",
    )


def sign_out(response: Response) -> Response:
    """Revoke the caller's session (if they came with one) and clear its cookie."""
    who = principal()
    if who.via == SESSION and who.user_id and who.token_id:
        accounts().revoke_token(who.user_id, who.token_id, kind=SESSION)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


def _loopback_http() -> bool:
    """Plain http to the loopback interface, the one place a cookie may go without TLS."""
    return request.scheme == "http" and host_allowed(
        request.host, ("127.0.0.1", "localhost", "[::1]")
    )


@blp.route("/me")
@ok(MeSchema)
@errors(401)
def me() -> dict[str, Any]:
    """Who the credentials of this request belong to, and what they may do."""
    return _me(principal())


def _me(who: Principal) -> dict[str, Any]:
    return {
        "id": who.user_id,
        "name": who.name,
        "role": who.role,
        "scopes": sorted(who.scopes),
        "via": who.via,
        "owned_tasks": sorted(who.owned_tasks),
    }


# -- tokens ----------------------------------------------------------------------------------
@blp.route("/tokens")
class Tokens(MethodView):
    @ok(TokenListSchema)
    @errors(401)
    def get(self) -> dict[str, Any]:
        """Your API tokens (never their secrets), newest first."""
        return {"tokens": accounts().tokens(_user_id())}

    @ok(IssuedTokenSchema, 201)
    @errors(401, 403, 422)
    @blp.arguments(TokenCreateSchema, as_kwargs=True)
    def post(
        self, name: str, scopes: list[str], expires_in_days: float | None = None
    ) -> tuple[dict[str, Any], int]:
        """A new API token; its secret is in ``token``, shown this once."""
        who = principal()
        beyond = set(scopes) - who.scopes
        if beyond:  # a token never grants more than the credentials that made it
            raise ApiError(
                403, "scope_not_allowed", f"you cannot grant scope(s) {', '.join(sorted(beyond))}"
            )
        store = accounts()
        expires_at = None
        if expires_in_days is not None:  # any positive lifetime, a second at least
            lifetime = max(timedelta(days=expires_in_days), timedelta(seconds=1))
            expires_at = store.clock.now() + lifetime
        try:
            issued = store.create_token(_user_id(), name, scopes, expires_at=expires_at)
        except AccountError as exc:
            raise _refused(exc) from None
        return _issued(issued), 201


@blp.route("/tokens/<token_id>", methods=["DELETE"])
@ok(TokenSchema)
@errors(401, 403, 404)
def revoke_token(token_id: str) -> TokenInfo:
    """Revoke one of your tokens (DELETE); it answers 401 token_revoked from then on. A
    token holding scopes your credentials lack is 403 ``scope_not_allowed``."""
    try:
        found = accounts().revoke_token(_user_id(), token_id, within=principal().scopes)
    except AccountError as exc:
        raise _refused(exc) from None
    if found is None:
        raise ApiError(404, "unknown_token", f"you have no token {token_id!r}")
    return found


@blp.route("/tokens/<token_id>/rotate", methods=["POST"])
@ok(IssuedTokenSchema, 201)
@errors(401, 403, 404, 422)
def rotate_token(token_id: str) -> tuple[dict[str, Any], int]:
    """Replace one of your tokens: the old one is revoked, the new secret shown once."""
    try:
        issued = accounts().rotate_token(_user_id(), token_id, within=principal().scopes)
    except AccountError as exc:
        raise _refused(exc) from None
    if issued is None:
        raise ApiError(404, "unknown_token", f"you have no token {token_id!r}")
    return _issued(issued), 201


def _issued(issued: IssuedToken) -> dict[str, Any]:
    return issued.info | {"token": issued.secret}


def _user_id() -> str:
    user_id = principal().user_id
    assert user_id is not None  # the access level let only signed-in requests through
    return user_id


# -- users and task access (admins) ----------------------------------------------------------
@blp.route("/users")
class Users(MethodView):
    @ok(UserListSchema)
    @errors(401, 403)
    def get(self) -> dict[str, Any]:
        """Every user (admins only)."""
        return {"users": accounts().users()}

    @ok(UserSchema, 201)
    @errors(401, 403, 409, 422)
    @blp.arguments(UserCreateSchema, as_kwargs=True)
    def post(self, name: str, role: str, password: str | None = None) -> tuple[UserInfo, int]:
        """Add a user (admins only); a password is needed only for the page login."""
        try:
            return accounts().add_user(name, role, password), 201
        except AccountError as exc:
            raise _refused(exc) from None


@blp.route("/tasks/<task_name>/access", methods=["PUT"])
@ok(TaskAccessOutSchema)
@errors(401, 403, 404, 422)
@blp.arguments(TaskAccessSchema, as_kwargs=True)
def set_task_access(task_name: str, owner: str | None, private: bool) -> dict[str, Any]:
    """Give a task an owner (who sees its submissions) and make it private or public."""
    try:
        found = accounts().set_task_access(task_name, owner, private)
    except AccountError as exc:
        raise _refused(exc) from None
    return {"task": found.name, "owner_id": found.owner_id, "private": found.private}


# -- reruns (admins and task owners) ---------------------------------------------------------
class RerunSchema(Schema):
    id = fields.String()
    job_id = fields.String()
    status = fields.String()


@blp.route("/submissions/<model_id>/rerun", methods=["POST"])
@ok(RerunSchema, 201)
@errors(401, 403, 404, 409)
def rerun(model_id: str) -> tuple[dict[str, Any], int]:
    """Evaluate a submission again, from any final state (its submitter, its task's owner
    or an admin): a failed job is retried in place with a fresh budget of attempts (its
    earlier attempts stay in its history); a finished one gets a new job (after fixing a
    dataset, say). A submitter's rerun needs room in their quota (429 otherwise). Others who
    may see it get 403; those who may not, 404."""
    done = rerun_submission(current_app.extensions["dynaeval"], principal(), model_id)
    return {"id": model_id, "job_id": done.job_id, "status": "queued"}, 201


# -- publication (the submitter or an admin) -------------------------------------------------
class PublicationSchema(Schema):
    published = fields.Boolean(required=True)


class PublicationOutSchema(Schema):
    id = fields.String()
    published = fields.Boolean()


@blp.route("/submissions/<model_id>/publication", methods=["PUT"])
@ok(PublicationOutSchema)
@errors(401, 403, 404, 422)
@blp.arguments(PublicationSchema, as_kwargs=True)
def set_publication(model_id: str, published: bool) -> dict[str, Any]:
    """Publish a submission (its submitter or an admin): its page and full scores become
    public (a private task's stay with those who may see the task); its failure reason and
    log tail never are. ``false`` takes it back. Those who may read it get 403 ``not_owner``;
    others, 404."""
    found = decide_publication(model_id, published)
    return {"id": found.model_id, "published": found.published}
