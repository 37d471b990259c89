"""Logging for long-running commands (``serve``, ``worker``): human text or one JSON object
per line, and never a bearer token or a session cookie in either."""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import IO, Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# ``extra={...}`` keys a JSON line carries when a record has them.
CONTEXT_FIELDS = ("job_id", "worker_id", "request_id", "model_id", "task")
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s\"',;]+")
_COOKIE = re.compile(r"(?i)(dynaeval_session\s*=\s*)[^\s\"',;]+")
MASK = "***"


def mask_secrets(text: str) -> str:
    """``Bearer ***`` and ``dynaeval_session=***`` in place of the secrets."""
    return _COOKIE.sub(rf"\g<1>{MASK}", _BEARER.sub(rf"\g<1>{MASK}", text))


class SecretFilter(logging.Filter):
    """Masks tokens and session cookies in a record's message (and its arguments)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_secrets(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and the context fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": mask_secrets(record.getMessage()),
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = str(value)
        if record.exc_info:
            entry["exception"] = mask_secrets(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


# What a running service says without -v: each job a worker claims, finishes, fails, hands
# back or recovers (an operator reads these to know what happened; they are a few a minute)
SERVICE_LOGGERS = ("worker.worker",)


def configure_logging(
    log_format: str = "text",
    *,
    verbose: bool = False,
    stream: IO[str] | None = None,
    service: bool = False,
) -> logging.Handler:
    """Replace the root logger's handlers with one writing to ``stream`` (stderr) in
    ``log_format`` (``text`` or ``json``), with secrets masked; returns the handler. A
    ``service`` (serve, worker) logs its jobs' lifecycle at INFO even without ``verbose``."""
    if log_format not in ("text", "json"):
        raise ValueError(f"unknown log format {log_format!r}: text or json")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    handler.addFilter(SecretFilter())  # on the handler: records of every logger pass it
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # waitress's "Serving on..." and werkzeug's line per request only when asked for
    for chatty in ("werkzeug", "waitress"):
        logging.getLogger(chatty).setLevel(logging.INFO if verbose else logging.WARNING)
    for name in SERVICE_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if service or verbose else logging.NOTSET)
    return handler
