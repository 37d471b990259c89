"""How a use case says no, without knowing HTTP: the kind of refusal, a machine-readable
code and a sentence. The API maps each kind to its status (``api.errors``); the CLI prints
the sentence and exits non-zero."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

Kind = Literal[
    "invalid",  # the input breaks a rule (422)
    "not_found",  # no such object, or not one the caller may see (404)
    "forbidden",  # the caller may see it but not do this (403)
    "conflict",  # the object's state does not allow it now (409)
    "too_large",  # the input is over a size limit (413)
    "too_many",  # a quota or rate is used up (429)
    "unavailable",  # a component it needs is down (503)
]


class Refused(Exception):
    """An action the rules do not allow, and why."""

    def __init__(
        self,
        kind: Kind,
        code: str,
        message: str,
        *,
        retry_after_s: int | None = None,
        details: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.kind, self.code, self.message = kind, code, message
        self.retry_after_s = retry_after_s  # when asking again may succeed
        self.details = dict(details or {})
