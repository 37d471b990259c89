"""The production server (waitress, as ``dynaeval serve`` runs it) on 127.0.0.1: idle and
slow connections hold no thread, stalled bodies time out, the banner is neutral, refusals
before the app are JSON; and a database outage answers 503, not 500."""

from __future__ import annotations

import json
import logging
import socket
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

from api.app import create_app
from api.server import MAX_REQUEST_LINE, SERVER_BANNER, WaitressServer
from tests.unit.auth_helpers import issue_token
from tests.unit.test_api import assert_error, make_service
from usecases.service import Service

THREADS = 2
IDLE_CONNECTIONS = 300


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = make_service(tmp_path)
    yield svc
    svc.close()


@pytest.fixture
def app(service: Service) -> Flask:
    return create_app(service)


def serve(app: Flask, **options: int) -> Iterator[WaitressServer]:
    server = WaitressServer(app, "127.0.0.1", 0, threads=THREADS, **options)
    server.start()
    try:
        yield server
    finally:
        server.shutdown(drain_s=5)


@pytest.fixture
def live(app: Flask) -> Iterator[WaitressServer]:
    yield from serve(app)


def health(port: int) -> dict:
    url = f"http://127.0.0.1:{port}/api/v1/health"
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - loopback
        assert response.headers["Server"] == SERVER_BANNER
        return json.load(response)


def raw_request(port: int, data: bytes) -> tuple[str, dict[str, str], bytes]:
    """Status line, headers and body of one request sent as bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return status, headers, body


def stalled_upload(port: int) -> socket.socket:
    """A connection that sent the headers of a 1 MB body and 10 bytes of it, then stalls."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(
        b"POST /api/v1/tasks/sentiment/submissions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n" + b"{" * 10
    )
    return sock


def test_idle_connections_hold_no_thread(live: WaitressServer) -> None:
    before = threading.active_count()
    idle = [
        socket.create_connection(("127.0.0.1", live.server_port)) for _ in range(IDLE_CONNECTIONS)
    ]
    try:
        assert health(live.server_port)["status"] == "ok"
        assert threading.active_count() <= before  # the loop and THREADS were there already
    finally:
        for sock in idle:
            sock.close()


def test_slow_bodies_do_not_take_the_threads(live: WaitressServer) -> None:
    slow = [stalled_upload(live.server_port) for _ in range(THREADS * 2)]
    try:
        for _ in range(3):
            assert health(live.server_port)["status"] == "ok"
    finally:
        for sock in slow:
            sock.close()


def test_a_stalled_body_is_timed_out(app: Flask) -> None:
    for server in serve(app, channel_timeout=1, cleanup_interval=1):
        sock = stalled_upload(server.server_port)
        sock.settimeout(15)
        with sock:
            assert sock.recv(1024) == b""  # closed by the server, nothing answered
        assert health(server.server_port)["status"] == "ok"


def test_the_banner_is_neutral(live: WaitressServer) -> None:
    status, headers, _ = raw_request(
        live.server_port,
        b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    assert status.startswith("HTTP/1.1 200")
    assert headers["server"] == SERVER_BANNER
    assert "waitress" not in json.dumps(headers).lower()


def test_a_request_line_over_the_limit_is_a_json_414(live: WaitressServer) -> None:
    line = b"GET /api/v1/tasks/" + b"x" * (MAX_REQUEST_LINE + 4000)  # no end of line needed
    status, headers, body = raw_request(live.server_port, line)
    assert status.startswith("HTTP/1.1 414")
    assert headers["content-type"] == "application/json"
    assert headers["server"] == SERVER_BANNER
    error = json.loads(body)["error"]
    assert error["code"] == "request_uri_too_long" and error["message"]


@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (b"NONSENSE\r\n\r\n", "400", "bad_request"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nbad header\r\n\r\n", "400", "bad_request"),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
            "501",
            "not_implemented",
        ),
    ],
)
def test_malformed_requests_are_json(
    live: WaitressServer, request_bytes: bytes, status: str, code: str
) -> None:
    line, headers, body = raw_request(live.server_port, request_bytes)
    assert line.split()[1] == status, line
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["error"]["code"] == code


def test_the_body_limit_is_the_apps(live: WaitressServer, app: Flask) -> None:
    """Uploads up to the app's limit reach the app (its own 413 beyond), through a temporary
    file past ``inbuf_overflow``: memory stays bounded."""
    assert live.adj.max_request_body_size == app.config["MAX_CONTENT_LENGTH"] + 1
    assert live.adj.inbuf_overflow <= 1024 * 1024
    assert live.adj.ident == SERVER_BANNER


def test_shutdown_stops_listening(app: Flask) -> None:
    server = WaitressServer(app, "127.0.0.1", 0, threads=THREADS)
    thread = server.start()
    assert health(server.server_port)["status"] == "ok"
    server.shutdown(drain_s=5)
    assert not thread.is_alive()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.server_port), timeout=5).close()


# -- a database outage ------------------------------------------------------------------------
def unplug(service: Service, tmp_path: Path) -> None:
    """Point the service at a database file in a folder that does not exist."""
    gone = create_engine(f"sqlite:///{tmp_path / 'no-such-folder' / 'db.sqlite3'}")
    service.db.engine = gone
    service.db.sessions = sessionmaker(gone, expire_on_commit=False)


def test_a_database_outage_is_503_with_retry_after(
    service: Service, app: Flask, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    token = issue_token(service)
    unplug(service, tmp_path)
    client = app.test_client()
    with caplog.at_level(logging.WARNING, logger="api.errors"):
        public = client.get("/api/v1/health")
        ready = client.get("/api/v1/ready")
        signed = client.get("/api/v1/submissions", headers={"Authorization": f"Bearer {token}"})
    for response in (public, ready, signed):
        assert_error(response, 503, "database_unavailable")
        assert int(response.headers["Retry-After"]) > 0
    warnings = [r for r in caplog.records if r.name == "api.errors"]
    assert len(warnings) == 3 and all(r.levelno == logging.WARNING for r in warnings)
    assert all(r.exc_info is None for r in warnings)
    text = caplog.text
    assert "database unavailable" in text and token not in text and "Traceback" not in text


def test_a_database_outage_is_503_through_waitress(
    service: Service, app: Flask, tmp_path: Path
) -> None:
    for server in serve(app):
        unplug(service, tmp_path)
        status, headers, body = raw_request(
            server.server_port,
            b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )
        assert status.startswith("HTTP/1.1 503")
        assert headers["retry-after"]
        assert json.loads(body)["error"]["code"] == "database_unavailable"
