"""Which errors mean the database is down, unreachable or out of connections (not the
client's fault, not a bug), and the one line that may be logged about one."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

DATABASE_OUTAGES: tuple[type[Exception], ...] = (OperationalError, InterfaceError, PoolTimeout)


def outage_reason(exc: Exception) -> str:
    """The driver's first line (``connection refused``...), never the statement or its
    parameters, which SQLAlchemy's own message quotes."""
    cause = exc.orig if isinstance(exc, DBAPIError) else exc
    lines = str(cause).strip().splitlines() or [type(cause).__name__]
    return lines[0][:200]
