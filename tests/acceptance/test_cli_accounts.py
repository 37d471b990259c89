"""``dynaeval users``, ``tokens`` and ``login`` as subprocesses, and the local admin that
``dynaeval serve`` makes on loopback (used by the CLI on the same machine)."""

from __future__ import annotations

import json
import stat
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.conftest import REPO, Run, dynaeval_command, serving

PASSWORD = "a long enough password"


def feed(cli_env: dict[str, str], stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``dynaeval ARGS`` with ``stdin`` as its input."""
    return subprocess.run(
        [*dynaeval_command(), *args],
        cwd=REPO,
        env=cli_env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_users_add_and_list(run: Run, cli_env: dict[str, str]) -> None:
    added = feed(cli_env, PASSWORD + "\n", "users", "add", "root", "--admin", "--password-stdin")
    assert added.returncode == 0, added.stderr
    assert "added admin root" in added.stdout and PASSWORD not in added.stdout
    assert feed(cli_env, "", "users", "add", "ci-bot", "--no-password").returncode == 0
    listed = run("users", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    users = {u["name"]: u for u in json.loads(listed.stdout)}
    assert users["root"]["role"] == "admin" and users["root"]["has_password"] is True
    assert users["ci-bot"]["role"] == "researcher" and users["ci-bot"]["has_password"] is False
    again = feed(cli_env, PASSWORD + "\n", "users", "add", "root", "--password-stdin")
    assert again.returncode == 2 and "already" in again.stderr


def test_users_add_never_takes_a_default_password(cli_env: dict[str, str]) -> None:
    # No terminal and no --password-stdin: refused, not a made-up password.
    done = feed(cli_env, "", "users", "add", "root", "--admin")
    assert done.returncode == 2 and "--password-stdin" in done.stderr
    short = feed(cli_env, "short\n", "users", "add", "root", "--admin", "--password-stdin")
    assert short.returncode == 2 and "8 characters" in short.stderr


def test_tokens_on_the_local_database(run: Run, cli_env: dict[str, str]) -> None:
    assert feed(cli_env, "", "users", "add", "ci-bot", "--no-password").returncode == 0
    created = run("tokens", "create", "ci", "--user", "ci-bot", "--scope", "read", "--json")
    assert created.returncode == 0, created.stderr
    token = json.loads(created.stdout)
    assert token["token"].startswith(token["prefix"]) and token["scopes"] == ["read"]
    listed = run("tokens", "list", "--user", "ci-bot", "--json")
    assert token["token"] not in listed.stdout
    assert [t["id"] for t in json.loads(listed.stdout)] == [token["id"]]
    rotated = json.loads(run("tokens", "rotate", token["id"], "--user", "ci-bot", "--json").stdout)
    assert rotated["token"] != token["token"]
    revoked = json.loads(
        run("tokens", "revoke", rotated["id"], "--user", "ci-bot", "--json").stdout
    )
    assert revoked["state"] == "revoked"
    states = {
        t["id"]: t["state"]
        for t in json.loads(run("tokens", "list", "--user", "ci-bot", "--json").stdout)
    }
    assert states == {token["id"]: "revoked", rotated["id"]: "revoked"}
    admin = run("tokens", "create", "x", "--user", "ci-bot", "--scope", "admin")
    assert admin.returncode == 2 and "cannot hold" in admin.stderr
    assert run("tokens", "list").returncode == 2  # neither --user nor --server


@pytest.mark.parametrize("days", ["1e20", "0", "-1", "nan", "inf", "soon"])
def test_a_token_lifetime_out_of_range_is_a_usage_error(run: Run, days: str) -> None:
    refused = run("tokens", "create", "x", "--user", "ci-bot", "--expires-in-days", days)
    assert refused.returncode == 2
    assert "must be a number of days > 0 and <= 3650" in refused.stderr
    assert "Traceback" not in refused.stderr


# -- against a running server ----------------------------------------------------------------
@pytest.fixture
def server(cli_env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    with serving(cli_env, tmp_path / "serve.log") as (base, output):
        yield base
    assert "dyn_" not in output[0]  # the token is in a file, never in the log


def get(url: str, token: str | None = None, host: str | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url)  # noqa: S310
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if host:
        request.add_header("Host", host)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_serve_makes_a_local_admin_the_cli_uses(run: Run, server: str, data_dir: Path) -> None:
    path = data_dir / "local-admin.json"
    assert path.exists() and mode(path) == 0o600
    stored = json.loads(path.read_text())
    assert stored["user"] == "local-admin" and stored["server"] == server
    assert get(server + "/api/v1/submissions")[0] == 401
    status, me = get(server + "/api/v1/me", stored["token"])
    assert status == 200 and me["role"] == "admin"
    # The CLI on this machine needs no flag: it finds the token for its loopback server.
    listed = run("tokens", "list", "--server", server, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [t["name"] for t in json.loads(listed.stdout)] == ["dynaeval serve"]
    missing = run("status", "00000000-0000-0000-0000-000000000000", "--server", server)
    assert missing.returncode == 2 and "unknown_submission" in missing.stderr


def test_serve_checks_the_host(server: str) -> None:
    status, body = get(server + "/api/v1/tasks", host="attacker.example:80")
    assert status == 421 and body["error"]["code"] == "host_not_allowed"
    assert get(server + "/api/v1/tasks")[0] == 200


def test_login_stores_a_token_0600(
    run: Run, cli_env: dict[str, str], server: str, tmp_path: Path
) -> None:
    added = feed(cli_env, PASSWORD + "\n", "users", "add", "alice", "--password-stdin")
    assert added.returncode == 0, added.stderr
    wrong = feed(
        cli_env,
        "not the password\n",
        "login",
        "--server",
        server,
        "--user",
        "alice",
        "--password-stdin",
    )
    assert wrong.returncode == 2 and "invalid_credentials" in wrong.stderr
    done = feed(
        cli_env, PASSWORD + "\n", "login", "--server", server, "--user", "alice", "--password-stdin"
    )
    assert done.returncode == 0, done.stderr
    path = Path(cli_env["XDG_CONFIG_HOME"]) / "dynaeval" / "credentials.json"
    assert mode(path) == 0o600 and "as alice (researcher)" in done.stdout
    token = json.loads(path.read_text())["servers"][server]["token"]
    assert get(server + "/api/v1/me", token)[1]["name"] == "alice"
    # From now on the CLI acts as alice on that server: her tokens, not the local admin's.
    listed = json.loads(run("tokens", "list", "--server", server, "--json").stdout)
    assert [t["name"] for t in listed] == ["cli"]
    made = json.loads(
        run("tokens", "create", "ci", "--server", server, "--expires-in-days", "7", "--json").stdout
    )
    assert made["expires_at"] and made["token"] != token
    rotated = json.loads(run("tokens", "rotate", made["id"], "--server", server, "--json").stdout)
    assert get(server + "/api/v1/me", made["token"])[1]["error"]["code"] == "token_revoked"
    assert get(server + "/api/v1/me", rotated["token"])[0] == 200
    assert run("tokens", "revoke", rotated["id"], "--server", server).returncode == 0
    assert get(server + "/api/v1/me", rotated["token"])[1]["error"]["code"] == "token_revoked"
    pasted = feed(cli_env, token + "\n", "login", "--server", server, "--token-stdin")
    assert pasted.returncode == 0, pasted.stderr
    bad = feed(cli_env, "dyn_not-a-token\n", "login", "--server", server, "--token-stdin")
    assert bad.returncode == 2 and "unauthenticated" in bad.stderr
