"""Accounts for the API tests: users with tokens, and test clients that send them."""

from __future__ import annotations

from flask.testing import FlaskClient

from store.accounts import ROLE_SCOPES, Accounts
from usecases.service import Service


def issue_token(
    service: Service, name: str = "admin", role: str = "admin", scopes: list[str] | None = None
) -> str:
    """A token for user ``name`` (created with ``role`` when new); the secret."""
    accounts = Accounts(service.db, service.clock)
    user = accounts.user_by_name(name) or accounts.add_user(name, role)
    chosen = scopes if scopes is not None else sorted(ROLE_SCOPES[user["role"]])
    return accounts.create_token(user["id"], f"{name}-test", chosen).secret


def signed_in(client: FlaskClient, token: str) -> FlaskClient:
    """``client`` sending ``Authorization: Bearer <token>`` on every request."""
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client


def admin_client(client: FlaskClient, service: Service) -> FlaskClient:
    return signed_in(client, issue_token(service))
