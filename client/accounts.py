"""``dynaeval users``, ``dynaeval tokens``, ``dynaeval login`` and the local admin that
``dynaeval serve`` makes on loopback.

``users`` works on the configured database (the operator's command, like ``rescore``).
``tokens`` works on a server with ``--server`` (your own tokens, through the API) or on the
local database with ``--user NAME``."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from client import credentials, render
from client.common import CliError, open_service
from configs.vocabulary.scopes import DEFAULT_TOKEN_SCOPES, SCOPES, TOKENS

if TYPE_CHECKING:
    from flask import Flask

    from client.sdk import DynaevalClient
    from usecases.service import Service

LOCAL_ADMIN = "local-admin"


# -- users -----------------------------------------------------------------------------------
def cmd_users(args: argparse.Namespace) -> int:
    from store.accounts import AccountError, Accounts

    service = open_service()
    try:
        accounts = Accounts(service.db, service.clock)
        if args.users_command == "add":
            role = "admin" if args.admin else args.role
            password = None if args.no_password else _read_password(args.password_stdin)
            try:
                user = accounts.add_user(args.name, role, password)
            except AccountError as exc:
                raise CliError(exc.message) from None
            print(f"added {user['role']} {user['name']} ({user['id']})")
            return 0
        if args.users_command == "set-role":
            try:
                user = accounts.set_role(args.name, args.role)
            except AccountError as exc:
                raise CliError(exc.message) from None
            print(f"{user['name']} is now {'an' if user['role'][0] in 'aeiou' else 'a'} "
                  f"{user['role']}")  # fmt: skip
            return 0
        users = accounts.users()
    finally:
        service.close()
    if args.json:
        render.emit_json(users)
    else:
        rows = [
            [u["name"], u["role"], "yes" if u["has_password"] else "no", u["created_at"]]
            for u in users
        ]
        print(render.table(["name", "role", "password", "created"], rows))
    return 0


def _read_password(from_stdin: bool) -> str:
    """One line from stdin, or typed twice at a terminal; never a default."""
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif sys.stdin.isatty():
        password = getpass.getpass("password: ")
        if getpass.getpass("again: ") != password:
            raise CliError("the passwords differ")
    else:
        raise CliError("no terminal to ask for a password: use --password-stdin or --no-password")
    if not password:
        raise CliError("an empty password is not a password")
    return password


# -- tokens ----------------------------------------------------------------------------------
def cmd_tokens(args: argparse.Namespace) -> int:
    result = _tokens_remote(args) if args.server else _tokens_local(args)
    _show_tokens(args, result)
    return 0


def _tokens_remote(args: argparse.Namespace) -> Any:
    from client.sdk import ApiClientError

    client = _client(args.server)
    action = args.tokens_command
    try:
        if action == "create":
            return client.create_token(args.name, args.scope, args.expires_in_days)
        if action == "list":
            return client.tokens()
        if action == "revoke":
            return client.revoke_token(args.id)
        return client.rotate_token(args.id)
    except ApiClientError as exc:
        raise CliError(str(exc)) from None


def _tokens_local(args: argparse.Namespace) -> Any:
    from store.accounts import AccountError, Accounts

    if not args.user:
        raise CliError("name the user with --user (local database) or the server with --server")
    service = open_service()
    try:
        accounts = Accounts(service.db, service.clock)
        user = accounts.user_by_name(args.user)
        if user is None:
            raise CliError(f"no user {args.user!r} (add one with `dynaeval users add`)")
        return _local_action(args, accounts, user["id"])
    except AccountError as exc:
        raise CliError(exc.message) from None
    finally:
        service.close()


def _local_action(args: argparse.Namespace, accounts: Any, user_id: str) -> Any:
    action = args.tokens_command
    if action == "create":
        expires = None
        if args.expires_in_days is not None:
            expires = accounts.clock.now() + timedelta(days=args.expires_in_days)
        scopes = args.scope or list(DEFAULT_TOKEN_SCOPES)
        issued = accounts.create_token(user_id, args.name, scopes, expires_at=expires)
        return issued.info | {"token": issued.secret}
    if action == "list":
        return accounts.tokens(user_id)
    found = (
        accounts.revoke_token(user_id, args.id)
        if action == "revoke"
        else accounts.rotate_token(user_id, args.id)
    )
    if found is None:
        raise CliError(f"{args.user} has no token {args.id!r}")
    return found if isinstance(found, dict) else found.info | {"token": found.secret}


def _show_tokens(args: argparse.Namespace, result: Any) -> None:
    if args.json:
        render.emit_json(result)
        return
    rows = result if isinstance(result, list) else [result]
    table = [
        [
            t["id"],
            t["name"],
            t["prefix"] + "…",
            " ".join(t["scopes"]),
            t["state"],
            t["expires_at"] or "never",
        ]
        for t in rows
    ]
    print(render.table(["id", "name", "prefix", "scopes", "state", "expires"], table))
    if isinstance(result, dict) and result.get("token"):
        # The secret goes to stdout once, on its own line, for `| tail -1` in scripts.
        print("token (shown once, store it now):", file=sys.stderr)
        print(result["token"])


# -- login -----------------------------------------------------------------------------------
def cmd_login(args: argparse.Namespace) -> int:
    """Store a token for ``--server``: a pasted one (``--token-stdin``), or a new one made
    after a password login."""
    from client.sdk import ApiClientError, DynaevalClient

    if args.token_stdin:
        token = sys.stdin.readline().strip()
        if not token:
            raise CliError("no token on stdin")
    else:
        token = _token_from_password(args)
    try:
        me = DynaevalClient(args.server, api_key=token).me()
    except ApiClientError as exc:
        raise CliError(f"the server refused the token: {exc}") from None
    path = credentials.save_token(args.server, token, me["name"])
    print(f"logged in to {args.server} as {me['name']} ({me['role']}); token stored in {path}")
    return 0


def _token_from_password(args: argparse.Namespace) -> str:
    """Log in with a password, make an API token with the session, then log out."""
    import requests

    if not args.user:
        raise CliError("name the user with --user, or paste a token with --token-stdin")
    password = _read_password(args.password_stdin)
    base = args.server.rstrip("/") + "/api/v1"
    with requests.Session() as http:
        try:
            login = http.post(
                base + "/session", json={"name": args.user, "password": password}, timeout=30
            )
            if login.status_code != 200:
                raise CliError(f"login refused: {_error(login)}")
            csrf = {"X-CSRF-Token": login.json()["csrf_token"]}
            made = http.post(
                base + "/tokens",
                # the person's own credential on this machine: it may manage their tokens
                json={"name": args.token_name, "scopes": [*DEFAULT_TOKEN_SCOPES, TOKENS]},
                headers=csrf,
                timeout=30,
            )
            if made.status_code != 201:
                raise CliError(f"could not create a token: {_error(made)}")
            http.delete(base + "/session", headers=csrf, timeout=30)
        except requests.RequestException as exc:
            raise CliError(f"cannot reach {args.server}: {exc}") from None
    return str(made.json()["token"])


def _error(response: Any) -> str:
    try:
        error = response.json()["error"]
        return f"{response.status_code} {error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        return f"{response.status_code}"


def _client(server: str) -> DynaevalClient:
    from client.sdk import DynaevalClient

    return DynaevalClient(server)


# -- serve: the Host allow-list and the local admin ------------------------------------------
ALLOWED_HOSTS_ENV = "DYNAEVAL_ALLOWED_HOSTS"


def serve_hosts(args: argparse.Namespace, port: int) -> list[str]:
    """Loopback names on the serve port, the bound address, ``--allowed-host`` entries and
    ``$DYNAEVAL_ALLOWED_HOSTS`` (comma-separated)."""
    from api.auth import LOOPBACK_HOSTS

    hosts = [f"{name}:{port}" for name in LOOPBACK_HOSTS]
    if args.host not in ("0.0.0.0", "::", "") and not is_loopback(args.host):
        hosts.append(f"[{args.host}]:{port}" if ":" in args.host else f"{args.host}:{port}")
    extra = [h.strip() for h in os.environ.get(ALLOWED_HOSTS_ENV, "").split(",") if h.strip()]
    return hosts + list(args.allowed_host or []) + extra


def is_loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def serve_access(
    app: Flask, service: Service, args: argparse.Namespace, port: int, base: str
) -> None:
    """Set the served app's Host allow-list; on loopback, make sure the local admin's token
    exists and say where it is."""
    from api.auth import allow_hosts
    from store.db import default_data_dir

    hosts = serve_hosts(args, port)
    allow_hosts(app, hosts)
    print(f"answering for hosts: {', '.join(hosts)}", flush=True)
    if is_loopback(args.host):
        path = ensure_local_admin(service, base, default_data_dir())
        print(f"local admin token: {path} (mode 0600; the CLI on this machine uses it)", flush=True)
    else:
        print(
            "not on loopback: create an admin with `dynaeval users add NAME --admin` and a token "
            "with `dynaeval tokens create NAME --user NAME --scope admin`",
            flush=True,
        )


def ensure_local_admin(service: Service, server: str, data_dir: Path) -> Path:
    """The local admin and a token for it, made once and kept in ``<data dir>/local-admin.json``
    (0600) where the CLI on this machine finds it; a lost or dead token is replaced, and so
    is one made before a scope was added (it is revoked)."""
    from store.accounts import Accounts, AuthFailure

    accounts = Accounts(service.db, service.clock)
    path = credentials.local_admin_path(data_dir)
    stored = credentials.read_json(path)
    if stored.get("token"):
        try:
            who = accounts.authenticate(str(stored["token"]))
        except AuthFailure:
            pass
        else:
            if who.scopes >= set(SCOPES):
                if stored.get("server") != server:
                    credentials.write_private(path, stored | {"server": server})
                return path
            if who.user_id and who.token_id:
                accounts.revoke_token(who.user_id, who.token_id)
    user = accounts.user_by_name(LOCAL_ADMIN) or accounts.add_user(LOCAL_ADMIN, "admin")
    issued = accounts.create_token(user["id"], "dynaeval serve", SCOPES)
    credentials.write_private(path, {"server": server, "user": LOCAL_ADMIN, "token": issued.secret})
    return path
