"""REST API v1 for webhooks: a signed POST when a submission reaches a final state, so CI
need not poll. Each user manages their own (the ``submit`` scope); admins manage any.

A webhook covers every submission of its owner, or one submission (``model_id``) its owner
may see. Its secret (``whsec_...``) is shown when it is made and when it is rotated, never
again. Someone else's webhook answers 404, as an id nobody has."""

from __future__ import annotations

from typing import Any

from flask import current_app
from flask.views import MethodView
from marshmallow import Schema, fields, validate

from api.auth import accounts, principal
from api.bodies import Blueprint
from api.docs import error_docs, success_docs
from api.errors import ApiError
from configs.settings import load_settings
from configs.vocabulary.webhooks import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    FINAL_EVENTS,
    SIGNATURE_HEADER,
)
from store.rules.principals import Principal
from store.webhooks import TooManyWebhooks, Webhook, WebhookStore
from worker.webhooks import Refused, check_url

blp = Blueprint(
    "webhooks",
    __name__,
    url_prefix="/api/v1",
    description=(
        "Webhooks: a POST to your URL when a submission is done, failed or cancelled, with "
        f"headers {EVENT_HEADER}, {DELIVERY_HEADER} (the idempotency key) and "
        f"{SIGNATURE_HEADER}: t=<unix>,v1=<hex HMAC-SHA256 of '<t>.<body>' under the secret>"
    ),
)
ERRORS = {
    400: "bad_request: the body is not valid JSON",
    401: "unauthenticated, token_expired or token_revoked",
    403: "insufficient_scope (the submit scope; ?all=true needs an admin) or cross_site_refused",
    404: "unknown_webhook or unknown_submission (also someone else's)",
    409: "too_many_webhooks",
    422: "invalid_url (not http(s), or a local-network address the operator did not "
    "allow-list) or another field out of range",
}
errors = error_docs(blp, ERRORS)
ok = success_docs(blp)


# -- schemas ---------------------------------------------------------------------------------
_PORT = r"(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
# What the documented schema promises to accept: an http(s) URL to a public host name (a
# name with a top-level domain, not one that only resolves locally); an operator's
# allow-list lets more through (local hosts, address literals), which it does not promise.
WEBHOOK_URL = (
    rf"^https?://(?!(?:{_LABEL}\.)*(?:local|localhost|internal)(?:[:/?#]|$))"
    rf"(?:{_LABEL}\.)+[A-Za-z]{{2,63}}(?::{_PORT})?(?:[/?#][!-~]*)?$"
)


class WebhookCreateSchema(Schema):
    url = fields.String(
        required=True,
        # the server's own check (invalid_url) also takes the operator's allow-listed hosts
        validate=validate.Length(min=1, max=2048),
        metadata={"pattern": WEBHOOK_URL},
    )
    model_id = fields.String(
        load_default=None,
        allow_none=True,
        validate=validate.Length(max=64),
        metadata={"description": "only this submission; omitted: every submission of yours"},
    )
    events = fields.List(
        fields.String(validate=validate.OneOf(FINAL_EVENTS)),
        load_default=lambda: list(FINAL_EVENTS),
        validate=validate.Length(min=1, max=len(FINAL_EVENTS)),
    )


class WebhookListQuerySchema(Schema):
    everyone = fields.Boolean(
        data_key="all", load_default=False, metadata={"description": "everyone's (admins)"}
    )


class DeliveryQuerySchema(Schema):
    limit = fields.Integer(load_default=50, validate=validate.Range(min=1, max=200))


class WebhookSchema(Schema):
    id = fields.String()
    owner_id = fields.String()
    model_id = fields.String(allow_none=True)
    url = fields.String()
    events = fields.List(fields.String())
    created_at = fields.String()


class WebhookSecretSchema(WebhookSchema):
    secret = fields.String(metadata={"description": "the signing secret: shown this once"})


class WebhookListSchema(Schema):
    webhooks = fields.List(fields.Nested(WebhookSchema))


class AttemptSchema(Schema):
    at = fields.String()
    status_code = fields.Integer(allow_none=True)
    error = fields.String(allow_none=True)


class DeliverySchema(Schema):
    id = fields.String()
    event = fields.String()
    status = fields.String(metadata={"description": "pending, delivered or failed"})
    attempts = fields.Integer()
    max_attempts = fields.Integer()
    last_status_code = fields.Integer(allow_none=True)
    last_error = fields.String(allow_none=True)
    next_attempt_at = fields.String(allow_none=True)
    last_attempt_at = fields.String(allow_none=True)
    created_at = fields.String()
    history = fields.List(fields.Nested(AttemptSchema))


class DeliveryListSchema(Schema):
    deliveries = fields.List(fields.Nested(DeliverySchema))


class PingSchema(Schema):
    delivery_id = fields.String()
    status = fields.String()


# -- routes ----------------------------------------------------------------------------------
@blp.route("/webhooks")
class Webhooks(MethodView):
    @ok(WebhookListSchema)
    @errors(401, 403, 422)
    @blp.arguments(WebhookListQuerySchema, location="query", as_kwargs=True)
    def get(self, everyone: bool = False) -> dict[str, Any]:
        """Your webhooks, newest first (``?all=true``: everyone's, for admins)."""
        who = principal()
        if everyone and not who.is_admin:
            raise ApiError(403, "insufficient_scope", "only admins may list every webhook")
        found = store().webhooks(None if everyone else _user_id(who))
        return {"webhooks": [hook.to_dict() for hook in found]}

    @ok(WebhookSecretSchema, 201)
    @errors(400, 401, 403, 404, 409, 422)
    @blp.arguments(WebhookCreateSchema, as_kwargs=True)
    def post(
        self, url: str, events: list[str], model_id: str | None = None
    ) -> tuple[dict[str, Any], int]:
        """A webhook on your submissions (or on one you may see, ``model_id``), called on
        the given final states. The signing secret is in ``secret``, shown this once."""
        who = principal()
        try:
            check_url(url, _allow_hosts())
        except Refused as exc:
            raise ApiError(422, "invalid_url", str(exc)) from None
        if model_id is not None:
            found = accounts().model_access(model_id)
            if found is None or not who.may_see_model(*found):
                raise ApiError(404, "unknown_submission", f"no submission {model_id!r}")
        try:
            hook, secret = store().create(_user_id(who), url, events, model_id)
        except TooManyWebhooks as exc:
            raise ApiError(409, "too_many_webhooks", str(exc)) from None
        return hook.to_dict() | {"secret": secret}, 201


@blp.route("/webhooks/<webhook_id>")
class OneWebhook(MethodView):
    @ok(WebhookSchema)
    @errors(401, 403, 404)
    def get(self, webhook_id: str) -> dict[str, Any]:
        """One of your webhooks (never its secret)."""
        return _mine(webhook_id).to_dict()

    @ok(WebhookSchema)
    @errors(401, 403, 404)
    def delete(self, webhook_id: str) -> dict[str, Any]:
        """Delete a webhook; its pending deliveries are never sent."""
        hook = _mine(webhook_id)
        if not store().delete(hook.id):
            raise _unknown(webhook_id)  # deleted meanwhile
        return hook.to_dict()


@blp.route("/webhooks/<webhook_id>/rotate-secret", methods=["POST"])
@ok(WebhookSecretSchema)
@errors(401, 403, 404)
def rotate_secret(webhook_id: str) -> dict[str, Any]:
    """A new signing secret, shown this once; deliveries are signed with it from now on
    (also retries of earlier ones)."""
    hook = _mine(webhook_id)
    secret = store().rotate_secret(hook.id)
    if secret is None:
        raise _unknown(webhook_id)
    return hook.to_dict() | {"secret": secret}


@blp.route("/webhooks/<webhook_id>/deliveries")
@ok(DeliveryListSchema)
@errors(401, 403, 404, 422)
@blp.arguments(DeliveryQuerySchema, location="query", as_kwargs=True)
def deliveries(webhook_id: str, limit: int = 50) -> dict[str, Any]:
    """The newest deliveries: status, attempts, the last HTTP status or error, when the
    next attempt is due, and each attempt."""
    hook = _mine(webhook_id)
    return {"deliveries": store().deliveries(hook.id, limit)}


@blp.route("/webhooks/<webhook_id>/test", methods=["POST"])
@ok(PingSchema, 202)
@errors(401, 403, 404)
def send_test(webhook_id: str) -> tuple[dict[str, Any], int]:
    """Queue a ``ping`` delivery to the webhook (see its deliveries for how it went)."""
    hook = _mine(webhook_id)
    delivery_id = store().ping(hook.id)
    if delivery_id is None:
        raise _unknown(webhook_id)
    return {"delivery_id": delivery_id, "status": "pending"}, 202


# -- helpers ---------------------------------------------------------------------------------
def store() -> WebhookStore:
    service = current_app.extensions["dynaeval"]
    return WebhookStore(service.db, service.sealer, service.clock)


def _allow_hosts() -> tuple[str, ...]:
    """The operator's allow-list (app config first: tests and embedders set it there)."""
    configured = current_app.config.get("DYNAEVAL_WEBHOOK_ALLOW_HOSTS")
    return tuple(configured) if configured is not None else load_settings().webhook_allow_hosts


def _mine(webhook_id: str) -> Webhook:
    """The caller's webhook (any, for admins), else 404 as for an id nobody has."""
    who = principal()
    hook = store().get(webhook_id)
    if hook is None or not (who.is_admin or hook.owner_id == who.user_id):
        raise _unknown(webhook_id)
    return hook


def _unknown(webhook_id: str) -> ApiError:
    return ApiError(404, "unknown_webhook", f"no webhook {webhook_id!r}")


def _user_id(who: Principal) -> str:
    assert who.user_id is not None  # the access level let only signed-in requests through
    return who.user_id
