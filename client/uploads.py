"""Sending a large image as a resumable upload (the SDK's and the CLI's): one part in memory
at a time, each with its SHA-256, each retried after a dropped connection, and an upload
left unfinished by a dead process resumed by its id, sending only the parts not stored."""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import requests

from client.errors import ApiClientError

RESUMABLE_FROM = 64 * 2**20  # images at least this large go as resumable uploads
PART_RETRIES = 5  # a part is sent again this many times after a dropped connection
RETRIED_STATUSES = {502, 503, 504}  # a proxy or the server between restarts

Progress = Callable[[int, int], None]
"""Called with (bytes stored, bytes in all) as parts arrive."""


class Caller(Protocol):
    """What the upload needs of the SDK: one JSON call with its error handling."""

    def _call(self, method: str, path: str, **kwargs: Any) -> Any: ...


class UploadInterrupted(RuntimeError):
    """Parts could not be sent (after the retries): the upload stays on the server for a
    day, and ``upload_id`` resumes it."""

    def __init__(self, upload_id: str, sent: int, size: int, cause: Exception) -> None:
        super().__init__(
            f"upload {upload_id} stopped at {sent} of {size} bytes ({cause}); resume it "
            "with its id: only the missing parts are sent"
        )
        self.upload_id, self.sent, self.size, self.cause = upload_id, sent, size, cause


class UploadMismatch(ValueError):
    """A resumed upload is for another file (its size or task differs)."""


def send_upload(
    api: Caller,
    task: str,
    tarball: str | Path,
    *,
    upload_id: str | None = None,
    progress: Progress | None = None,
    sleep: Callable[[float], None] | None = None,
    started: Callable[[str], None] | None = None,
) -> str:
    """Send ``tarball`` as a resumable upload to ``task`` (or the missing parts of the
    unfinished upload ``upload_id``); returns the upload's id, ready to submit.
    ``started`` is told the id before any part is sent (a process killed later can then
    be resumed: keep it)."""
    path = Path(tarball)
    size = path.stat().st_size
    if upload_id is None:
        state = api._call(
            "POST", f"/tasks/{task}/uploads", json={"size": size, "filename": path.name[:255]}
        )
    else:
        state = api._call("GET", f"/uploads/{upload_id}")
        if state["size"] != size or state["task"] != task:
            raise UploadMismatch(
                f"upload {upload_id} is of {state['size']} bytes for task {state['task']!r}, "
                f"not this file's {size} bytes for {task!r}"
            )
    if started is not None:
        started(str(state["id"]))
    done = state["received_bytes"]
    report = progress or (lambda _done, _all: None)
    pause = sleep or time.sleep  # looked up now: tests replace time.sleep
    report(done, size)
    have, part_bytes = set(state["received"]), state["part_bytes"]
    with path.open("rb") as handle:
        for number in range(1, state["parts"] + 1):
            if number in have:
                continue
            handle.seek((number - 1) * part_bytes)
            data = handle.read(part_bytes)
            try:
                _put_part(api, state["id"], number, data, pause)
            except (requests.RequestException, ApiClientError) as exc:
                raise UploadInterrupted(state["id"], done, size, exc) from exc
            done += len(data)
            report(done, size)
    return str(state["id"])


def _put_part(
    api: Caller, upload_id: str, number: int, data: bytes, sleep: Callable[[float], None]
) -> None:
    """PUT one part with its digest; sent again after a dropped connection, a gateway's
    5xx or a digest the server saw differently (the bytes changed on the way)."""
    digest = base64.b64encode(hashlib.sha256(data).digest()).decode()
    headers = {"Content-Digest": f"sha-256=:{digest}:", "Content-Type": "application/octet-stream"}
    for attempt in range(PART_RETRIES + 1):
        try:
            api._call("PUT", f"/uploads/{upload_id}/parts/{number}", data=data, headers=headers)
            return
        except (requests.ConnectionError, requests.Timeout):
            if attempt == PART_RETRIES:
                raise
        except ApiClientError as exc:
            retried = exc.status in RETRIED_STATUSES or exc.code == "part_digest_mismatch"
            if not retried or attempt == PART_RETRIES:
                raise
        sleep(min(2.0**attempt, 30.0))
