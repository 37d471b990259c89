"""The one shape of a refused change: an HTTP status, a machine code and a sentence.

The store's collection, validation and adversary rules and the API's round changes refuse
with subclasses of ``Refused`` (nothing is stored when one is raised); the API turns any of
them into its ``{"error": {"code", "message"}}`` reply with that status."""

from __future__ import annotations


class Refused(Exception):
    """A change refused with an HTTP status, a code and a sentence (nothing stored)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
