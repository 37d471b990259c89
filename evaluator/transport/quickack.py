"""Replies read with TCP_QUICKACK re-armed around every read.

Many model servers write a reply's headers and body as two writes without TCP_NODELAY
(the standard library's ``http.server`` does). On a reused connection Nagle's algorithm
then holds the body until the headers are acknowledged, while Linux delays that ACK for
up to ~40 ms because the client has nothing to send: every request pays the stall, and
the throughput axis would measure the server's flushing habits instead of the model.

Linux's TCP_QUICKACK is not sticky: the kernel drops back to delayed ACKs as it sees fit.
Setting it again after each read sends any pending ACK at once and leaves the socket out
of delayed-ACK ("ping-pong") mode for what arrives next, so the stall never starts. On a
platform without the option the reader behaves like the standard one.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import socket
from typing import Any

_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


def rearm(sock: socket.socket) -> None:
    """Ask for immediate ACKs now (a no-op where the option does not exist)."""
    if _QUICKACK is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)


class _QuickAckReader(io.RawIOBase):
    """The socket's own unbuffered reader (``makefile``, so the socket stays open while a
    reply that outlives its connection is read), re-arming quick ACKs around each read."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock
        self._raw = sock.makefile("rb", buffering=0)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        rearm(self._sock)
        received = self._raw.readinto(buffer)
        rearm(self._sock)
        return received

    def close(self) -> None:
        self._raw.close()
        super().close()


class _QuickAckSocket:
    """What ``HTTPResponse`` sees as its socket: it only ever calls ``makefile``."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def makefile(self, mode: str) -> io.BufferedReader:
        if mode != "rb":
            raise ValueError(f"a reply is read as 'rb', not {mode!r}")
        return io.BufferedReader(_QuickAckReader(self._sock))


class QuickAckResponse(http.client.HTTPResponse):
    """An ``HTTPResponse`` whose reads re-arm TCP_QUICKACK."""

    def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
        super().__init__(_QuickAckSocket(sock), *args, **kwargs)  # type: ignore[arg-type]


class QuickAckConnection(http.client.HTTPConnection):
    """A keep-alive HTTP/1.1 connection that never waits on a delayed ACK."""

    response_class = QuickAckResponse

    def connect(self) -> None:
        super().connect()
        # Our own request goes out in one write already; NODELAY keeps it from waiting on
        # the server's ACK of the previous reply.
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rearm(self.sock)
