"""The HTTP servers ``dynaeval serve`` runs: waitress (the default) and werkzeug's
development server (``--dev-server``, kept for comparison and the benchmark).

With both, errors the HTTP layer answers before the app sees a request (a request line over
64 KiB, headers over the limit, a malformed request) leave in the API's JSON error shape,
not as an HTML or text page, and no response names the server software or its version
(``Server: Werkzeug/3.x Python/3.x`` told a scanner which exploits to try).

Why waitress: an idle or slow connection is a socket in one event loop, not a thread; a
request reaches the app (and one of ``threads`` worker threads) only once its whole body
has arrived (bodies over ``inbuf_overflow`` wait in a temporary file, so memory stays
bounded); a connection silent for ``channel_timeout`` seconds is closed.
"""

from __future__ import annotations

import json
import threading
import time
from http import HTTPStatus
from typing import Any

from flask import Flask
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask
from waitress.utilities import BadRequest
from waitress.wasyncore import close_all, dispatcher, loop
from werkzeug.exceptions import default_exceptions
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from api.errors import error_body

SERVER_BANNER = "Dynaeval"
MAX_REQUEST_LINE = 64 * 1024  # as werkzeug's (http.server's) limit: the same 414 either way
MAX_HEADER_BYTES = 128 * 1024  # request line and headers together
DEFAULT_THREADS = 8
DEFAULT_CONNECTION_LIMIT = 1000  # idle connections cost a socket each, not a thread
DEFAULT_CHANNEL_TIMEOUT_S = 60  # a connection silent this long is closed (a stalled body too)


def error_slug(code: int) -> str:
    """``request_uri_too_long`` for 414: werkzeug's name of the status, as the app's own."""
    known = default_exceptions.get(code)
    try:
        phrase = HTTPStatus(code).phrase
    except ValueError:
        phrase = "Error"
    name = (known().name if known is not None else phrase) or "error"
    return name.lower().replace(" ", "_").replace("-", "_")


def json_error(code: int, message: str) -> bytes:
    return json.dumps(error_body(error_slug(code), message)).encode()


# -- werkzeug (the development server) -------------------------------------------------------
class ApiRequestHandler(WSGIRequestHandler):
    """Werkzeug's handler with a neutral ``Server`` header and JSON transport errors."""

    @property
    def server_version(self) -> str:  # type: ignore[override]
        return SERVER_BANNER  # also the WSGI SERVER_SOFTWARE

    def version_string(self) -> str:
        return SERVER_BANNER  # the Server header: no software version, no Python version

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """``{"error": {"code", "message"}}`` instead of http.server's HTML page."""
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "Error"
        body = json_error(code, message or phrase)
        self.log_error("code %d, message %s", code, message)
        self.send_response(code, phrase)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        body_allowed = code >= 200 and code not in (HTTPStatus.NO_CONTENT, HTTPStatus.NOT_MODIFIED)
        if body_allowed:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body_allowed:
            self.wfile.write(body)
        self.close_connection = True


def make_api_server(host: str, port: int, app: Flask, **options: Any) -> BaseWSGIServer:
    """Werkzeug's threaded server (a thread per connection) answering with
    :class:`ApiRequestHandler`."""
    return make_server(host, port, app, threaded=True, request_handler=ApiRequestHandler, **options)


# -- waitress (production) -------------------------------------------------------------------
class UriTooLong(BadRequest):
    code = 414
    reason = "URI Too Long"


class ApiRequestParser(HTTPRequestParser):
    """waitress's parser with a limit on the request line alone (414, as werkzeug's)."""

    _line_seen = False
    completed: bool
    body_rcv: Any
    header_plus: bytes

    def received(self, data: bytes) -> int:
        if self.body_rcv is None and not self.completed and not self._line_seen:
            head = self.header_plus + data
            end = head.find(b"\n")
            self._line_seen = end >= 0
            if (end if end >= 0 else len(head)) > MAX_REQUEST_LINE:
                self.parse_header(b"GET / HTTP/1.1\r\n")  # what the error task needs
                self.error = UriTooLong(f"the request line is limited to {MAX_REQUEST_LINE} bytes")
                self.completed = True
                return len(data)
        consumed: int = super().received(data)
        return consumed


class JsonErrorTask(ErrorTask):
    """waitress's answer to a request it refused itself, in the API's JSON shape."""

    def execute(self) -> None:
        error = self.request.error
        body = json_error(error.code, _sentence(error.code, str(error.body)))
        self.status = f"{error.code} {error.reason}"
        self.response_headers.append(("Content-Type", "application/json"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


def _sentence(code: int, detail: str) -> str:
    # waitress's own bodies may quote a traceback (expose_tracebacks is off, but say less).
    if code >= 500:
        return "an unexpected error occurred" if code == 500 else detail.splitlines()[0]
    return detail


class ApiChannel(HTTPChannel):
    parser_class = ApiRequestParser
    error_task_class = JsonErrorTask


class _Listener(TcpWSGIServer):
    channel_class = ApiChannel


class WaitressServer:
    """waitress serving ``app`` on one address, with :meth:`shutdown` from another thread."""

    def __init__(
        self,
        app: Flask,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        threads: int = DEFAULT_THREADS,
        connection_limit: int = DEFAULT_CONNECTION_LIMIT,
        channel_timeout: int = DEFAULT_CHANNEL_TIMEOUT_S,
        cleanup_interval: int | None = None,
    ) -> None:
        self.adj = Adjustments(
            host=host,
            port=port,
            threads=threads,
            ident=SERVER_BANNER,
            connection_limit=connection_limit,
            channel_timeout=channel_timeout,
            cleanup_interval=cleanup_interval or max(1, min(30, channel_timeout // 2)),
            max_request_header_size=MAX_HEADER_BYTES,
            # The app refuses uploads over MAX_CONTENT_LENGTH with its own 413; waitress
            # refuses only what no task could accept (its default, 1 GiB, is below 2 GiB).
            max_request_body_size=_body_limit(app),
            asyncore_use_poll=True,  # select() stops at 1024 descriptors
            expose_tracebacks=False,
        )
        self._map: dict[int, Any] = {}
        self._listener = _Listener(app, map=self._map, adj=self.adj, sockinfo=self.adj.listen[0])
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        # The loop closes the trigger when it ends; a wake-up pulled after that would
        # write to a closed (or reused) descriptor, so both sides hold this lock.
        self._trigger_lock = threading.Lock()
        self._loop_closed = False

    @property
    def server_port(self) -> int:
        return int(self._listener.effective_port)

    def serve_forever(self) -> None:
        """Answer requests until :meth:`shutdown` (blocks)."""
        try:
            while not self._stopping.is_set():
                loop(timeout=self.adj.asyncore_loop_timeout, map=self._map, use_poll=True, count=1)
        finally:
            with self._trigger_lock:
                self._loop_closed = True
                close_all(self._map, ignore_all=True)
            self._listener.task_dispatcher.shutdown(timeout=5)

    def start(self) -> threading.Thread:
        """:meth:`serve_forever` in a daemon thread."""
        self._thread = threading.Thread(target=self.serve_forever, name="http", daemon=True)
        self._thread.start()
        return self._thread

    def shutdown(self, drain_s: float = 10.0) -> None:
        """Stop accepting connections, let requests in progress answer (up to ``drain_s``),
        then close every connection and end :meth:`serve_forever`."""
        self._wake(self._stop_listening)
        deadline = time.monotonic() + drain_s
        while not self._idle() and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stopping.set()
        self._wake()  # so the loop sees the flag now, not at its next timeout
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(drain_s + 10)

    def _wake(self, thunk: Any = None) -> None:
        with self._trigger_lock:
            if not self._loop_closed:
                self._listener.trigger.pull_trigger(thunk)

    def _stop_listening(self) -> None:
        # Runs in the loop's thread (a trigger thunk): the listening socket only, not the
        # trigger, which shutdown still needs.
        if self._listener.accepting:
            self._listener.accepting = False
            dispatcher.close(self._listener)

    def _idle(self) -> bool:
        tasks = self._listener.task_dispatcher
        channels = [c for c in list(self._map.values()) if isinstance(c, HTTPChannel)]
        busy = any(c.requests or c.total_outbufs_len for c in channels)
        return not tasks.queue and tasks.active_count == 0 and not busy


def _body_limit(app: Flask) -> int:
    limit = app.config.get("MAX_CONTENT_LENGTH")
    return int(limit) + 1 if limit else Adjustments.max_request_body_size
