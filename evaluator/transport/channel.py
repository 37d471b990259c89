"""One keep-alive HTTP/1.1 connection to a model, with a real deadline per exchange.

Every exchange is finished (headers, body and all) within its timeout or ends in
EvaluationError with a FailureCode: a timeout, a dropped connection, an oversized or
malformed reply. The connection is reopened when the model closed it while idle.
"""

from __future__ import annotations

import http.client
import select
import time
import weakref

from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.transport.deadlines import RequestDeadline
from evaluator.transport.quickack import QuickAckConnection


class Channel:
    """A connection to ``host:port`` that replies may not exceed ``max_reply_bytes`` on."""

    def __init__(self, host: str, port: int, max_reply_bytes: int) -> None:
        self.host = host
        self.port = port
        self.max_reply_bytes = max_reply_bytes
        self.conn: http.client.HTTPConnection | None = None
        self.deadline = RequestDeadline()
        weakref.finalize(self, self.deadline.stop)  # a channel never closed stops it too

    def close(self) -> None:
        """Drop the connection and stop the deadline thread (both restart on the next call)."""
        self.drop()
        self.deadline.stop()

    def drop(self) -> None:
        """Close the connection (the next request opens a new one)."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self.conn is not None and _dropped(self.conn):
            # The model closed an idle keep-alive connection (uvicorn does after 5 s, and
            # perturbing a round can take longer): open a new one rather than call it a crash.
            self.drop()
        if self.conn is None:
            # Quick ACKs: a server that writes headers and body apart must not pay a
            # delayed-ACK stall per request on the throughput axis (transport/quickack.py).
            self.conn = QuickAckConnection(self.host, self.port, timeout=timeout)
            self.conn.connect()
        self.conn.sock.settimeout(timeout)
        return self.conn

    def request(
        self, method: str, path: str, body: bytes | None, timeout: float
    ) -> tuple[int, bytes]:
        """One exchange, finished within ``timeout`` seconds (headers, body and all)."""
        try:
            return self._exchange(method, path, body, time.monotonic() + timeout)
        except EvaluationError:
            raise
        except TimeoutError:
            self.drop()
            raise EvaluationError(
                FailureCode.REQUEST_TIMEOUT,
                f"{method} {path} did not complete within {timeout:g} s",
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            self.drop()
            raise EvaluationError(
                FailureCode.CRASHED, f"{method} {path} failed: {type(exc).__name__}: {exc}"
            ) from None
        except Exception as exc:  # whatever the model sends must not pass for a platform fault
            self.drop()
            raise EvaluationError(
                FailureCode.BAD_STATUS,
                f"{method} {path} answered a malformed HTTP reply: {type(exc).__name__}",
            ) from None

    def _exchange(
        self, method: str, path: str, body: bytes | None, deadline: float
    ) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn = self._connection(max(deadline - time.monotonic(), 0.001))
        self.deadline.arm(conn.sock, deadline)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, self._read_limited(response)
        finally:
            if self.deadline.disarm():
                # The deadline passed and the socket was shut down: whatever the exchange
                # looked like after that (a reset, a short body), it is a timeout.
                raise TimeoutError("request deadline passed")

    def _read_limited(self, response: http.client.HTTPResponse) -> bytes:
        limit = self.max_reply_bytes
        length = response.getheader("Content-Length")
        if length is not None and length.isdigit() and int(length) > limit:
            response.close()  # the response holds the socket's file: close both
            self.drop()
            raise EvaluationError(
                FailureCode.REPLY_TOO_LARGE, f"reply of {length} bytes exceeds {limit} bytes"
            )
        data = response.read(limit + 1)
        if len(data) > limit:
            response.close()
            self.drop()
            raise EvaluationError(FailureCode.REPLY_TOO_LARGE, f"reply exceeds {limit} bytes")
        if response.will_close:
            self.drop()
        return data


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """Whether the peer closed an idle connection: readable before a request means EOF."""
    if conn.sock is None:
        return True
    poller = select.poll()  # poll, not select: worker processes may hold fds above 1024
    poller.register(conn.sock, select.POLLIN)
    return bool(poller.poll(0))
