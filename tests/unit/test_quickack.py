"""Replies read through evaluator/transport/quickack.py: every body framing reads whole, the
socket stays usable, and TCP_QUICKACK is asked for again around every read (no timing)."""

from __future__ import annotations

import contextlib
import http.client
import io
import socket
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from evaluator.transport import quickack
from evaluator.transport.quickack import QuickAckConnection, QuickAckResponse

QUICKACK = getattr(socket, "TCP_QUICKACK", 12)  # Linux's number where the platform has none
Write = bytes | threading.Event  # an Event: wait for the test before the next write


class ScriptedServer:
    """One connection on 127.0.0.1; each request gets the next scripted reply, written as
    the separate writes given (headers and body apart, like http.server), then it closes."""

    def __init__(self, replies: Sequence[Sequence[Write]]) -> None:
        self.replies = replies
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:  # closed by the test without a connection
            return
        with conn, conn.makefile("rb") as reader:
            for reply in self.replies:
                if not _read_request(reader):
                    return  # the client went away
                for write in reply:
                    if isinstance(write, threading.Event):
                        write.wait(5)
                    else:
                        conn.sendall(write)

    def close(self) -> None:
        with contextlib.suppress(OSError):  # wakes an accept() still waiting (Linux)
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join(timeout=5)


def _read_request(reader: Any) -> bytes:
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = reader.readline()
        if not line:
            return head
        head += line
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head + reader.read(length)


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ScriptedServer] = []

    def start(*replies: Sequence[Write]) -> QuickAckConnection:
        server = ScriptedServer(replies)
        servers.append(server)
        return QuickAckConnection("127.0.0.1", server.port, timeout=5)

    yield start
    for server in servers:
        server.close()


LENGTH = [b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", b"hello world"]
CHUNKED = [
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"5\r\nhello\r\n",
    b"6\r\n world\r\n",
    b"0\r\n\r\n",
]
CLOSE = [b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", b"hello ", b"world"]


def exchange(conn: http.client.HTTPConnection) -> http.client.HTTPResponse:
    conn.request("POST", "/predict", body=b'{"instances": []}')
    return conn.getresponse()


@pytest.mark.parametrize("reply", [LENGTH, CHUNKED], ids=["content-length", "chunked"])
def test_keep_alive_bodies_read_whole_and_the_connection_is_reused(serve: Any, reply: Any) -> None:
    conn = serve(reply, reply, reply)
    for _ in range(3):
        response = exchange(conn)
        assert isinstance(response, QuickAckResponse)
        assert (response.status, response.read(), response.will_close) == (
            200,
            b"hello world",
            False,
        )
    conn.close()


def test_a_body_ended_by_closing_the_connection_reads_whole(serve: Any) -> None:
    conn = serve(CLOSE)
    response = exchange(conn)
    assert response.will_close
    assert response.read() == b"hello world"
    conn.close()


def test_a_reply_outlives_its_connection(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``Connection: close`` reply takes the socket over from its connection, which lets
    go of it at once; the body, sent only afterwards, still reads whole through a socket
    that still takes the quick-ACK option."""
    monkeypatch.setattr(quickack, "_QUICKACK", QUICKACK)
    calls = record_quickack(monkeypatch)
    body_may_go = threading.Event()
    conn = serve([CLOSE[0], body_may_go, *CLOSE[1:]])
    response = exchange(conn)
    assert response.will_close and conn.sock is None  # the connection has let go
    before = len(calls)
    body_may_go.set()
    assert response.read() == b"hello world"
    assert len(calls) > before
    response.close()


def test_the_connection_sets_nodelay(serve: Any) -> None:
    conn = serve(LENGTH)
    conn.connect()
    assert conn.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    conn.close()


# -- TCP_QUICKACK around every read, shown on a fake socket ---------------------------------
class FakeSocket:
    """Records setsockopt calls and reads (in order); serves ``chunks`` one read at a time."""

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self.chunks = list(chunks)
        self.events: list[str] = []

    def setsockopt(self, level: int, option: int, value: int) -> None:
        if (level, option, value) == (socket.IPPROTO_TCP, QUICKACK, 1):
            self.events.append("quickack")

    def makefile(self, mode: str, buffering: int | None = None) -> io.RawIOBase:
        assert (mode, buffering) == ("rb", 0)  # unbuffered: one socket read per readinto
        return _FakeRaw(self)


class _FakeRaw(io.RawIOBase):
    def __init__(self, sock: FakeSocket) -> None:
        self.sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.sock.events.append("read")
        chunk = self.sock.chunks.pop(0) if self.sock.chunks else b""
        buffer[: len(chunk)] = chunk
        return len(chunk)


@pytest.fixture
def quickack_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quickack, "_QUICKACK", QUICKACK)


@pytest.mark.parametrize("reply", [LENGTH, CHUNKED, CLOSE], ids=["length", "chunked", "close"])
def test_quickack_is_asked_for_before_and_after_every_read(
    quickack_option: None, reply: Sequence[bytes]
) -> None:
    sock = FakeSocket(reply)
    response = QuickAckResponse(sock)  # type: ignore[arg-type]
    response.begin()
    assert response.read() == b"hello world"
    events = sock.events
    reads = [i for i, event in enumerate(events) if event == "read"]
    assert len(reads) >= len(reply)  # every separate write took a read of its own
    for i in reads:
        assert events[i - 1] == "quickack" and events[i + 1] == "quickack", events


def record_quickack(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The values every real socket is given for TCP_QUICKACK from now on (the call goes
    through to the kernel)."""
    calls: list[int] = []
    original = socket.socket.setsockopt

    def recording(self: socket.socket, level: int, option: int, value: Any, *rest: Any) -> Any:
        if (level, option) == (socket.IPPROTO_TCP, QUICKACK):
            calls.append(value)
        return original(self, level, option, value, *rest)

    monkeypatch.setattr(socket.socket, "setsockopt", recording)
    return calls


def test_quickack_is_set_again_on_a_real_socket_after_each_reply(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = record_quickack(monkeypatch)
    monkeypatch.setattr(quickack, "_QUICKACK", getattr(socket, "TCP_QUICKACK", None))
    if quickack._QUICKACK is None:
        pytest.skip("this platform has no TCP_QUICKACK")
    conn = serve(LENGTH, LENGTH)
    seen = []
    for _ in range(2):
        exchange(conn).read()
        seen.append(len(calls))
    assert calls and set(calls) == {1}
    assert seen[1] >= seen[0] + 2  # the second reply's reads re-armed it again
    conn.close()


def test_without_the_option_nothing_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quickack, "_QUICKACK", None)
    sock = FakeSocket(LENGTH)
    response = QuickAckResponse(sock)  # type: ignore[arg-type]
    response.begin()
    assert response.read() == b"hello world"
    assert "quickack" not in sock.events


def test_a_refused_option_does_not_fail_the_read(quickack_option: None) -> None:
    class Refusing(FakeSocket):
        def setsockopt(self, level: int, option: int, value: int) -> None:
            raise OSError("not supported here")

    response = QuickAckResponse(Refusing(LENGTH))  # type: ignore[arg-type]
    response.begin()
    assert response.read() == b"hello world"


def test_a_reply_is_only_ever_read(quickack_option: None) -> None:
    with pytest.raises(ValueError):
        quickack._QuickAckSocket(FakeSocket([])).makefile("wb")  # type: ignore[arg-type]
