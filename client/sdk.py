"""A small Python client for the Dynaeval API (used by the CLI's ``--server`` mode)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from evaluator.transport.dialects import DEFAULT_DIALECT

FINAL_STATUSES = ("done", "failed")


class ApiClientError(RuntimeError):
    """The server answered with an error (its code and sentence are kept)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class WaitTimeout(TimeoutError):
    """A submission did not reach a final state in time; ``submission`` is its last state."""

    def __init__(self, submission: dict[str, Any], timeout: float) -> None:
        status = job_status(submission) or "unknown"
        super().__init__(f"submission {submission.get('id')} is still {status} after {timeout:g} s")
        self.submission, self.timeout = submission, timeout


def job_status(submission: dict[str, Any]) -> str | None:
    """The status of a submission's job (``queued``, ``running``, ``done``, ``failed``)."""
    return (submission.get("job") or {}).get("status")


def wait_until_final(
    fetch: Callable[[], dict[str, Any]], timeout: float, poll: float
) -> dict[str, Any]:
    """Call ``fetch`` every ``poll`` seconds until the job is final; WaitTimeout after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = fetch()
        if job_status(found) in FINAL_STATUSES:
            return found
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimeout(found, timeout)
        time.sleep(min(poll, remaining))


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
        self, task: str, name: str, tarball: str | Path, protocol: str = DEFAULT_DIALECT
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
        """The submission once its job is done or failed; raises WaitTimeout (a
        TimeoutError carrying the last state) when ``timeout`` seconds pass first."""
        return wait_until_final(lambda: self.submission(model_id), timeout, poll)
