"""Deployment settings: where the database, the blobs and the data folder live.

Each setting comes from, in rising precedence: a default (the embedded set-up: SQLite and a
blob folder inside ``./dynaeval-data``), the settings file (TOML; ``--config``,
``$DYNAEVAL_CONFIG`` or ``./dynaeval.toml``), and the environment. The S3 connection keys
(``[s3]`` in the file, ``AWS_*`` in the environment) are handed to boto3 only when set: what
neither sets is left to boto3's own chain (shared config and credentials files, profiles,
instance roles). Nothing here connects anywhere.
"""

from __future__ import annotations

import base64
import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

from configs.schema import ConfigError

CONFIG_ENV = "DYNAEVAL_CONFIG"
CONFIG_FILE_NAME = "dynaeval.toml"  # read from the working folder when present
DEFAULT_DATA_DIR = "dynaeval-data"
MASK = "****"

# setting -> environment variables that set it, the first one set wins
ENV_VARS: Mapping[str, tuple[str, ...]] = {
    "data_dir": ("DYNAEVAL_DATA_DIR",),
    "database_url": ("DYNAEVAL_DATABASE_URL",),
    "store_url": ("DYNAEVAL_STORE_URL",),
    "webhook_allow_hosts": ("DYNAEVAL_WEBHOOK_ALLOW_HOSTS",),
    "keep_unscored_images_days": ("DYNAEVAL_KEEP_UNSCORED_IMAGES_DAYS",),
    "keep_scored_images_days": ("DYNAEVAL_KEEP_SCORED_IMAGES_DAYS",),
    "live_model_budget": ("DYNAEVAL_LIVE_MODEL_BUDGET",),
    "secret_key": ("DYNAEVAL_SECRET_KEY",),
    "s3.endpoint_url": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "s3.region": ("AWS_DEFAULT_REGION",),
    "s3.profile": ("AWS_PROFILE",),
    "s3.access_key_id": ("AWS_ACCESS_KEY_ID",),
    "s3.secret_access_key": ("AWS_SECRET_ACCESS_KEY",),
    "s3.session_token": ("AWS_SESSION_TOKEN",),
}
SECRET_KEYS = frozenset({"s3.secret_access_key", "s3.session_token", "secret_key"})
_TOP_KEYS = (
    "data_dir",
    "database_url",
    "store_url",
    "webhook_allow_hosts",
    "keep_unscored_images_days",
    "keep_scored_images_days",
    "live_model_budget",
    "secret_key",
)
NEVER = "never"
DEFAULT_LIVE_MODEL_BUDGET = 2
_S3_KEYS = tuple(key.removeprefix("s3.") for key in ENV_VARS if key.startswith("s3."))

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
_SECRET_PARAM = re.compile(r"pass|secret|token|key", re.IGNORECASE)


class SettingsError(ConfigError):
    """A setting is invalid; the message names where it came from and the key."""


@dataclass(frozen=True)
class Source:
    """Where a setting's value came from."""

    kind: Literal["default", "file", "env", "boto3"]
    where: str = ""  # the file's path or the variable's name

    def __str__(self) -> str:
        labels = {"default": "default", "boto3": "unset (boto3's own chain)"}
        return labels.get(self.kind) or f"{self.kind} {self.where}"


DEFAULT = Source("default")


@dataclass(frozen=True)
class S3Options:
    """How to reach S3; ``None`` leaves the option to boto3's chain."""

    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class LocalLocation:
    """Blobs in a local folder."""

    path: Path


@dataclass(frozen=True)
class S3Location:
    """Blobs in an S3 bucket, under ``prefix`` ("" or ending in "/")."""

    bucket: str
    prefix: str = ""


@dataclass(frozen=True)
class ImageRetention:
    """How long uploaded images are kept (days; None: for ever). A scored model's image is
    what a backfill runs on new data, so by default it is never removed; an image that never
    produced a score (its job failed or was cancelled) goes after ``unscored_days``."""

    unscored_days: float | None = 30.0
    scored_days: float | None = None

    def shown(self) -> tuple[str, str]:
        return _shown_days(self.unscored_days), _shown_days(self.scored_days)


def _shown_days(days: float | None) -> str:
    return NEVER if days is None else f"{days:g}"


@dataclass(frozen=True)
class Settings:
    """The effective settings and the source of each (keys as in the file: ``s3.region``)."""

    data_dir: Path
    database_url: str
    store_url: str
    s3: S3Options = S3Options()
    sources: Mapping[str, Source] = field(default_factory=dict)
    config_file: Path | None = None
    # hosts on local networks that webhooks may call: "host" or "host:port", comma-separated
    webhook_allow_hosts: tuple[str, ...] = ()
    image_retention: ImageRetention = ImageRetention()
    # in-the-loop models kept running at once per API process (collection rounds)
    live_model_budget: int = DEFAULT_LIVE_MODEL_BUDGET
    # the key that seals secrets at rest (webhook signing secrets): a Fernet key, 32 bytes of
    # url-safe base64; unset, each data folder keeps its own in ``secret.key`` (0600). Every
    # process sharing one database must have the same key.
    secret_key: str | None = field(default=None, repr=False)

    def source(self, key: str) -> Source:
        return self.sources.get(key, DEFAULT)

    def is_default(self, key: str) -> bool:
        return self.source(key).kind in ("default", "boto3")

    @property
    def store_location(self) -> LocalLocation | S3Location:
        return parse_store_url(self.store_url, Path.cwd(), self.source("store_url"))

    def rows(self) -> list[tuple[str, str | None, Source]]:
        """``(key, value fit to print, source)`` for every setting; secrets masked."""
        values: dict[str, str | None] = {
            "data_dir": str(self.data_dir),
            "database_url": mask_url(self.database_url),
            "store_url": self.store_url,
            "webhook_allow_hosts": ",".join(self.webhook_allow_hosts) or None,
            "keep_unscored_images_days": self.image_retention.shown()[0],
            "keep_scored_images_days": self.image_retention.shown()[1],
            "live_model_budget": str(self.live_model_budget),
            "secret_key": self.secret_key,
        }
        for name in _S3_KEYS:
            values[f"s3.{name}"] = getattr(self.s3, name)
        for key in SECRET_KEYS:
            values[key] = MASK if values[key] else None
        return [(key, values[key], self.source(key)) for key in ENV_VARS]


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Defaults < the settings file < the environment; raises SettingsError."""
    environ = os.environ if environ is None else environ
    cwd = cwd or Path.cwd()
    path = find_config_file(config_file, environ, cwd)
    raw: dict[str, tuple[str, Source]] = {}
    if path is not None:
        raw.update(_read_file(path))
    for key, names in ENV_VARS.items():
        for name in names:
            if environ.get(name):
                raw[key] = (environ[name], Source("env", name))
                break
    return _build(raw, cwd, path)


def find_config_file(
    explicit: str | os.PathLike[str] | None, environ: Mapping[str, str], cwd: Path
) -> Path | None:
    """``--config``, else ``$DYNAEVAL_CONFIG``, else ``./dynaeval.toml`` when present."""
    named = explicit or environ.get(CONFIG_ENV)
    if named:
        path = cwd / Path(named).expanduser()
        if not path.is_file():
            where = "--config" if explicit else f"${CONFIG_ENV}"
            raise SettingsError(where, "config file", f"no such file: {str(path)!r}")
        return path.resolve()
    local = cwd / CONFIG_FILE_NAME
    return local.resolve() if local.is_file() else None


def _read_file(path: Path) -> dict[str, tuple[str, Source]]:
    """The file's settings as flat keys; unknown keys and non-strings are errors."""
    source = Source("file", str(path))
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(str(path), "config file", f"cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(str(path), "config file", f"is not valid TOML: {exc}") from None
    s3 = data.pop("s3", {})
    if not isinstance(s3, dict):
        raise SettingsError(str(path), "s3", "must be a table ([s3])")
    _refuse_unknown(path, data, _TOP_KEYS + ("s3",), "")
    _refuse_unknown(path, s3, _S3_KEYS, "s3.")
    flat = {**data, **{f"s3.{key}": value for key, value in s3.items()}}
    for key, value in flat.items():
        if not isinstance(value, str):
            raise SettingsError(str(path), key, f"must be a string, not {type(value).__name__}")
    return {key: (value, source) for key, value in flat.items()}


def _refuse_unknown(path: Path, table: Mapping[str, Any], known: tuple[str, ...], at: str) -> None:
    unknown = sorted(set(table) - set(known))
    if not unknown:
        return
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, known, n=1)
        hints.append(f"{at}{key}" + (f" (did you mean {at}{close[0]}?)" if close else ""))
    allowed = ", ".join(f"{at}{key}" for key in known)
    raise SettingsError(str(path), ", ".join(hints), f"unknown setting (known: {allowed})")


def _build(raw: Mapping[str, tuple[str, Source]], cwd: Path, path: Path | None) -> Settings:
    """Validate each value, fill in the defaults, and keep every value's source."""
    sources = {key: source for key, (_, source) in raw.items()}
    for key in ENV_VARS:
        sources.setdefault(key, Source("boto3") if key.startswith("s3.") else DEFAULT)

    def base(key: str) -> Path:  # relative paths in the file are relative to the file
        source = sources[key]
        return Path(source.where).parent if source.kind == "file" else cwd

    data_dir = Path(raw["data_dir"][0]) if "data_dir" in raw else Path(DEFAULT_DATA_DIR)
    data_dir = (base("data_dir") / data_dir.expanduser()).resolve()
    database_url = f"sqlite:///{data_dir / 'dynaeval.sqlite3'}"
    if "database_url" in raw:
        database_url = check_database_url(raw["database_url"][0], sources["database_url"])
    store_url = str(data_dir / "blobs")
    if "store_url" in raw:
        store_url = normalise_store_url(
            raw["store_url"][0], base("store_url"), sources["store_url"]
        )
    s3 = {name: raw[f"s3.{name}"][0] for name in _S3_KEYS if f"s3.{name}" in raw}
    if "endpoint_url" in s3:
        check_endpoint_url(s3["endpoint_url"], sources["s3.endpoint_url"])
    hooks = raw.get("webhook_allow_hosts", ("", DEFAULT))[0]
    allow = tuple(entry.strip().lower() for entry in hooks.split(",") if entry.strip())
    retention = ImageRetention(
        _days(raw, "keep_unscored_images_days", ImageRetention.unscored_days),
        _days(raw, "keep_scored_images_days", ImageRetention.scored_days),
    )
    return Settings(
        data_dir, database_url, store_url, S3Options(**s3), sources, path, allow, retention,
        _budget(raw), _secret_key(raw),
    )  # fmt: skip


def _secret_key(raw: Mapping[str, tuple[str, Source]]) -> str | None:
    """A Fernet key: 32 bytes in url-safe base64 (``openssl rand -base64 32 | tr '+/' '-_'``)."""
    if "secret_key" not in raw:
        return None
    text, source = raw["secret_key"]
    try:
        valid = len(base64.urlsafe_b64decode(text.strip().encode("ascii"))) == 32
    except (ValueError, UnicodeEncodeError):
        valid = False
    if not valid:
        raise _error(source, "secret_key", "must be 32 bytes in url-safe base64 (44 characters)")
    return text.strip()


def _budget(raw: Mapping[str, tuple[str, Source]]) -> int:
    """How many live models may run at once: a whole number from 1 to 64."""
    if "live_model_budget" not in raw:
        return DEFAULT_LIVE_MODEL_BUDGET
    text, source = raw["live_model_budget"]
    if not text.strip().isdigit() or not 1 <= int(text) <= 64:
        raise _error(source, "live_model_budget", f"must be a whole number from 1 to 64: {text!r}")
    return int(text)


def _days(raw: Mapping[str, tuple[str, Source]], key: str, default: float | None) -> float | None:
    """A number of days >= 0, or ``never`` (None)."""
    if key not in raw:
        return default
    text, source = raw[key]
    if text.strip().lower() == NEVER:
        return None
    try:
        days = float(text)
    except ValueError:
        days = -1.0
    if not days >= 0 or days == float("inf"):
        raise _error(source, key, f"must be a number of days (0 or more) or {NEVER!r}: {text!r}")
    return days


def _error(source: Source, key: str, problem: str) -> SettingsError:
    """An error starting with the file's path or ``$VARIABLE``, then the key."""
    where = {"file": source.where, "env": f"${source.where}"}.get(source.kind, source.kind)
    return SettingsError(where, key, problem)


def check_database_url(url: str, source: Source = DEFAULT) -> str:
    """A SQLAlchemy URL such as ``postgresql+psycopg://user@host/db`` (never echoes a password)."""
    if not _SCHEME.match(url):  # not echoed: where it does not parse, a password may show
        raise _error(
            source,
            "database_url",
            "not a database URL "
            "(expected e.g. postgresql+psycopg://user@host/db or sqlite:////path/file.sqlite3)",
        )
    return url


def check_endpoint_url(url: str, source: Source = DEFAULT) -> str:
    """An ``http(s)://host[:port]`` endpoint."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _error(source, "s3.endpoint_url", f"not an http(s) URL: {mask_url(url)!r}")
    return url


def normalise_store_url(url: str, base: Path, source: Source = DEFAULT) -> str:
    """``s3://bucket/prefix`` as given, or an absolute folder path (from a path or file://)."""
    location = parse_store_url(url, base, source)
    if isinstance(location, S3Location):
        return f"s3://{location.bucket}/{location.prefix}".rstrip("/")
    return str(location.path)


def parse_store_url(url: str, base: Path, source: Source = DEFAULT) -> LocalLocation | S3Location:
    """Where blobs live: a folder (path or ``file:///path``) or ``s3://bucket[/prefix]``."""
    match = _SCHEME.match(url)
    if not match:
        if not url.strip():
            raise _error(source, "store_url", "is empty")
        return LocalLocation((base / Path(url).expanduser()).resolve())
    scheme, parts = match.group(1).lower(), urlsplit(url)
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise _error(source, "store_url", f"{url!r}: use file:///absolute/path")
        return LocalLocation(Path(parts.path).resolve())
    if scheme != "s3":
        raise _error(
            source,
            "store_url",
            f"unsupported scheme {scheme!r} in {mask_url(url)!r} "
            "(use a folder path, file:///path or s3://bucket/prefix)",
        )
    return _s3_location(url, parts.netloc, parts.path, source)


def _s3_location(url: str, bucket: str, path: str, source: Source) -> S3Location:
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise _error(
            source,
            "store_url",
            f"{url!r}: {bucket!r} is not a valid bucket name "
            "(3-63 lowercase letters, digits, dots and hyphens)",
        )
    prefix = path.strip("/")
    if prefix and (".." in prefix.split("/") or "//" in prefix or "?" in url or "#" in url):
        raise _error(source, "store_url", f"{url!r}: invalid key prefix {prefix!r}")
    return S3Location(bucket, f"{prefix}/" if prefix else "")


def mask_url(url: str) -> str:
    """``url`` with its password and secret-looking query values replaced by ``****``."""
    match = _SCHEME.match(url)
    if not match:
        return url
    rest = url[match.end() :]
    # The userinfo ends at the last "@" before the path (passwords may hold "@" or "/"):
    # masking too much is harmless, printing a fragment of a password is not.
    if "@" in rest:
        userinfo, rest = rest.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        rest = f"{user}:{MASK}@{rest}" if ":" in userinfo else f"{user}@{rest}"
    head, sep, query = rest.partition("?")
    if sep:
        pairs = parse_qsl(query, keep_blank_values=True)
        masked = [(k, MASK if _SECRET_PARAM.search(k) else v) for k, v in pairs]
        rest = f"{head}?{urlencode(masked, safe='*/:')}"
    return url[: match.end()] + rest
