"""Where the CLI and SDK keep API tokens: one JSON file per user, readable by them only.

``$XDG_CONFIG_HOME/dynaeval/credentials.json`` (default ``~/.config/...``) maps a server's
base URL to a token. On the server's own machine the token ``dynaeval serve`` made for the
local admin (``<data dir>/local-admin.json``) is used when the file has none for it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

LOCAL_ADMIN_FILE = "local-admin.json"
API_KEY_ENV = "DYNAEVAL_API_KEY"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "dynaeval"


def credentials_path() -> Path:
    return config_dir() / "credentials.json"


def normalize(server: str) -> str:
    """``http://LOCALHOST:8000/`` → ``http://localhost:8000``: one key per server."""
    parts = urlsplit(server.strip())
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


def write_private(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON readable and writable by the owner only (0600, folder 0700)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    # Created 0600 from the start: the secret is never readable by others, even briefly.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), 0o600)
        json.dump(data, handle, indent=2)
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_token(server: str, token: str, user: str) -> Path:
    """Remember ``token`` for ``server``; returns the file."""
    path = credentials_path()
    data = read_json(path)
    data.setdefault("servers", {})[normalize(server)] = {"token": token, "user": user}
    write_private(path, data)
    return path


def forget(server: str) -> bool:
    path = credentials_path()
    data = read_json(path)
    found = data.get("servers", {}).pop(normalize(server), None)
    if found is not None:
        write_private(path, data)
    return found is not None


def token_for(server: str, data_dir: Path | None = None) -> str | None:
    """``$DYNAEVAL_API_KEY``, else the stored token for ``server``, else (for a loopback
    server) the local admin token ``dynaeval serve`` wrote into the data folder."""
    if os.environ.get(API_KEY_ENV):
        return os.environ[API_KEY_ENV]
    entry = read_json(credentials_path()).get("servers", {}).get(normalize(server))
    if isinstance(entry, dict) and entry.get("token"):
        return str(entry["token"])
    if urlsplit(server).hostname not in LOOPBACK:
        return None
    local = read_json(local_admin_path(data_dir))
    if local.get("token") and _same_port(local.get("server", ""), server):
        return str(local["token"])
    return None


def local_admin_path(data_dir: Path | None = None) -> Path:
    # imported here: the store pulls in SQLAlchemy, which `dynaeval --help` never needs
    from store.db import default_data_dir

    return (data_dir or default_data_dir()) / LOCAL_ADMIN_FILE


def _same_port(stored: str, server: str) -> bool:
    """Both on loopback and the same port (``localhost`` and ``127.0.0.1`` are one host)."""
    a, b = urlsplit(stored), urlsplit(server)
    return a.hostname in LOOPBACK and b.hostname in LOOPBACK and a.port == b.port
