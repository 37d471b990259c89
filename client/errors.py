"""What the SDK raises when the server says no."""

from __future__ import annotations


class ApiClientError(RuntimeError):
    """The server answered with an error (its code and sentence are kept)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message
