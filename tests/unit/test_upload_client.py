"""The SDK and the CLI sending resumable uploads to a real HTTP server on 127.0.0.1: parts
retried after a dropped connection, an interrupted upload resumed by its id (only missing
parts sent), progress reported, and the CLI naming the id to resume with."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from werkzeug.serving import make_server

from api.app import create_app
from client import sdk
from client.cli import main
from client.sdk import DynaevalClient
from client.uploads import UploadInterrupted, send_upload
from store.models import ModelRow
from tests.unit.auth_helpers import issue_token
from tests.unit.test_resumable_uploads import image_tar, stored_image
from usecases.service import Service

PART = 4096


@dataclass
class Live:
    url: str
    token: str
    service: Service
    tarball: Path
    puts: list[int]  # part numbers PUT, as the server saw them


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    service = Service.open(tmp_path / "data")
    service.upload_part_bytes = PART
    app = create_app(service)
    puts: list[int] = []

    @app.before_request
    def record() -> None:
        from flask import request

        if request.method == "PUT":
            puts.append(int(request.path.rsplit("/", 1)[1]))

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    tarball = tmp_path / "model.tar"
    tarball.write_bytes(image_tar(30_000))  # 8 parts
    try:
        token = issue_token(service, "alice", "researcher")
        yield Live(f"http://127.0.0.1:{server.server_port}", token, service, tarball, puts)
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
        service.close()


class Flaky:
    """A requests.Session.request that drops the connection on chosen PUT attempts."""

    def __init__(self, session: requests.Session, drop: set[int]) -> None:
        self.real, self.drop, self.attempts = session.request, drop, 0

    def __call__(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        if method == "PUT":
            self.attempts += 1
            if self.attempts in self.drop:
                raise requests.ConnectionError("connection reset by peer")
        return self.real(method, url, **kwargs)


def parts_of(live: Live) -> int:
    return -(-live.tarball.stat().st_size // PART)


def test_the_sdk_sends_parts_with_progress_and_submits(live: Live) -> None:
    seen: list[tuple[int, int]] = []
    api = DynaevalClient(live.url, api_key=live.token)
    made = api.submit_image(
        "sentiment", "big", live.tarball, resumable=True, progress=lambda *a: seen.append(a)
    )
    size = live.tarball.stat().st_size
    assert made["status"] == "queued"
    assert stored_image(live.service, made["id"]) == live.tarball.read_bytes()
    assert seen[0] == (0, size) and seen[-1] == (size, size)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    assert sorted(live.puts) == list(range(1, parts_of(live) + 1))


def test_a_dropped_connection_sends_that_part_again(live: Live) -> None:
    api = DynaevalClient(live.url, api_key=live.token)
    api.http.request = Flaky(api.http, drop={3, 4})  # type: ignore[method-assign]
    upload_id = send_upload(api, "sentiment", live.tarball, sleep=lambda _s: None)
    # the third part failed twice before reaching the server, then went once
    assert sorted(live.puts) == list(range(1, parts_of(live) + 1))
    assert api.upload(upload_id)["received_bytes"] == live.tarball.stat().st_size


def test_an_interrupted_upload_resumes_by_its_id_sending_only_missing_parts(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = DynaevalClient(live.url, api_key=live.token)
    api.http.request = Flaky(api.http, drop=set(range(4, 100)))  # type: ignore[method-assign]
    monkeypatch.setattr("client.uploads.time.sleep", lambda _s: None)
    with pytest.raises(UploadInterrupted) as stopped:
        send_upload(api, "sentiment", live.tarball, sleep=lambda _s: None)
    assert stopped.value.sent == 3 * PART
    assert live.puts == [1, 2, 3]
    resumed = DynaevalClient(live.url, api_key=live.token)  # a new process, the same id
    made = resumed.submit_image("sentiment", "big", live.tarball, upload_id=stopped.value.upload_id)
    assert live.puts == list(range(1, parts_of(live) + 1))
    assert stored_image(live.service, made["id"]) == live.tarball.read_bytes()


def test_resuming_with_another_file_is_refused(live: Live, tmp_path: Path) -> None:
    api = DynaevalClient(live.url, api_key=live.token)
    upload_id = api._call("POST", "/tasks/sentiment/uploads", json={"size": 10})["id"]
    with pytest.raises(ValueError, match="not this file's"):
        api.submit_image("sentiment", "big", live.tarball, upload_id=upload_id)


def test_the_cli_names_the_upload_to_resume_and_resumes_it(
    live: Live, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sdk, "RESUMABLE_FROM", 1)  # this small tarball goes in parts too
    monkeypatch.setenv("DYNAEVAL_API_KEY", live.token)
    monkeypatch.setattr("client.uploads.time.sleep", lambda _s: None)
    real = requests.Session.request
    attempts = {"put": 0}

    def dropping(self: requests.Session, method: str, url: str, **kwargs: Any) -> Any:
        if method == "PUT":
            attempts["put"] += 1
            if attempts["put"] > 2:
                raise requests.ConnectionError("connection reset by peer")
        return real(self, method, url, **kwargs)

    monkeypatch.setattr(requests.Session, "request", dropping)
    argv = ["submit", str(live.tarball), "--task", "sentiment", "--name", "big"]
    argv += ["--server", live.url, "--idempotency-key", "ci-run-7"]
    assert main(argv) == 3
    message = capsys.readouterr().err
    assert "--upload-id " in message and "--idempotency-key ci-run-7" in message
    upload_id = message.split("--upload-id ", 1)[1].split()[0]
    monkeypatch.setattr(requests.Session, "request", real)
    assert main([*argv, "--upload-id", upload_id]) == 0
    with live.service.db.session() as session:
        assert session.query(ModelRow).count() == 1
    assert main([*argv[:-2], "--upload-id", upload_id]) == 3  # it became a submission
    assert "upload_submitted" in capsys.readouterr().err


def test_the_cli_refuses_an_upload_id_without_a_server(
    live: Live, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["submit", str(live.tarball), "--task", "sentiment", "--name", "big"]
    assert main([*argv, "--upload-id", "x"]) == 3
    assert "give --server too" in capsys.readouterr().err


def test_a_retry_waits_for_its_first_request_to_finish_the_upload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The submission timed out while the server joined the parts: the retry finds the
    upload busy, waits, and gets the first request's submission (replayed)."""
    from client.errors import ApiClientError

    monkeypatch.setattr(sdk, "BUSY_WAIT_S", 0.0)
    monkeypatch.setattr("client.sdk.time.sleep", lambda _s: None)
    answers: list[Any] = [
        requests.Timeout("read timed out"),
        ApiClientError(409, "upload_busy", "upload u is being submitted"),
        ApiClientError(409, "upload_busy", "upload u is being submitted"),
        {"id": "m1", "replayed": True},
    ]

    def send() -> dict[str, Any]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    api = DynaevalClient("http://127.0.0.1:9", api_key="k")
    assert api._submit_retried(send) == {"id": "m1", "replayed": True, "retried": 1}
    # without a request of its own in flight, a busy upload is someone else's: an error
    answers[:] = [ApiClientError(409, "upload_busy", "upload u is being submitted")]
    with pytest.raises(ApiClientError, match="upload_busy"):
        api._submit_retried(send)
