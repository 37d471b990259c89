"""Where a started model listens and which dialect it speaks (what a runtime hands the
transport)."""

from __future__ import annotations

from dataclasses import dataclass, field

from evaluator.transport.dialects import DEFAULT_DIALECT, Dialect, get_dialect


@dataclass(frozen=True)
class Endpoint:
    """A model's host, port and dialect."""

    host: str
    port: int
    dialect: Dialect = field(default_factory=lambda: get_dialect(DEFAULT_DIALECT))
