"""A small Python client for the Dynaeval API (used by the CLI's ``--server`` mode)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import requests


class ApiClientError(RuntimeError):
    """The server answered with an error (its code and sentence are kept)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class DynaevalClient:
    """``DynaevalClient("http://127.0.0.1:8000").submit_image("sentiment", "m", "m.tar")``"""

    def __init__(self, base_url: str, timeout: float = 60.0) -> None:
        self.base = base_url.rstrip("/") + "/api/v1"
        self.timeout = timeout
        self.http = requests.Session()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, self.base + path, timeout=self.timeout, **kwargs)
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code >= 400:
            error = body.get("error", {}) if isinstance(body, dict) else {}
            raise ApiClientError(
                response.status_code,
                error.get("code", "http_error"),
                error.get("message", response.text[:200]),
            )
        return body

    def tasks(self) -> list[dict[str, Any]]:
        return self._call("GET", "/tasks")["tasks"]

    def submit(self, task: str, name: str, runtime: dict[str, Any]) -> dict[str, Any]:
        return self._call(
            "POST", f"/tasks/{task}/submissions", json={"name": name, "runtime": runtime}
        )

    def submit_image(
        self, task: str, name: str, tarball: str | Path, protocol: str = "v1"
    ) -> dict[str, Any]:
        with open(tarball, "rb") as handle:
            return self._call(
                "POST",
                f"/tasks/{task}/submissions",
                data={"name": name, "protocol": protocol},
                files={"image": (Path(tarball).name, handle)},
            )

    def submission(self, model_id: str) -> dict[str, Any]:
        return self._call("GET", f"/submissions/{model_id}")

    def leaderboard(self, task: str, weights: str | None = None) -> dict[str, Any]:
        params = {"weights": weights} if weights else {}
        return self._call("GET", f"/tasks/{task}/leaderboard", params=params)

    def wait(self, model_id: str, timeout: float = 3600, poll: float = 2.0) -> dict[str, Any]:
        """Poll until the submission's job is done or failed (bounded by ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.submission(model_id)
            job = found.get("job") or {}
            if job.get("status") in ("done", "failed") or time.monotonic() > deadline:
                return found
            time.sleep(poll)
