"""A tiny, reusable Dynaeval protocol-v1 model server (Python standard library only).

Usage from a model file::

    from dynaeval_server import serve

    def predict(task: str, instances: list[dict]) -> list[dict]:
        return [{"uid": inst["uid"], "label": "positive"} for inst in instances]

    serve(predict, {"name": "my-model", "version": "1", "framework": "stdlib"})

The handler speaks HTTP/1.1 with keep-alive, sends ``Content-Length`` on every reply and
sets ``TCP_NODELAY`` (``disable_nagle_algorithm``): without it, headers and body go out in
separate writes and each request stalls ~40 ms on delayed ACKs.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Predict = Callable[[str, list[dict]], list[dict]]

MAX_BODY_BYTES = 64 * 1024 * 1024


class _Server(ThreadingHTTPServer):
    """Threading HTTP server carrying the model's predict function and metadata."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], predict: Predict, metadata: dict) -> None:
        super().__init__(address, _Handler)
        self.predict = predict
        self.metadata_body = json.dumps(metadata).encode()


class _Handler(BaseHTTPRequestHandler):
    """Protocol-v1 request handler: /health, /metadata, /predict."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        """Silence per-request logging (it costs throughput and floods container logs)."""

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str) -> None:
        self._send(status, json.dumps({"error": message}).encode())

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/health":
            self._send(200, b'{"status":"ok"}')
        elif path == "/metadata":
            self._send(200, self.server.metadata_body)
        else:
            self._error(404, "not found")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True
            self._error(400, "missing or invalid Content-Length")
            return
        raw = self.rfile.read(length) if length else b""
        if path != "/predict":
            self._error(404, "not found")
            return
        try:
            payload = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            self._error(400, "body is not valid JSON")
            return
        if not isinstance(payload, dict) or not isinstance(payload.get("instances"), list):
            self._error(400, 'expected {"task": ..., "instances": [...]}')
            return
        instances = payload["instances"]
        if not all(isinstance(inst, dict) for inst in instances):
            self._error(400, "every instance must be a JSON object")
            return
        try:
            predictions = self.server.predict(str(payload.get("task") or ""), instances)
        except Exception as exc:  # report model errors as 500, keep serving
            self._error(500, f"{type(exc).__name__}: {exc}")
            return
        self._send(200, json.dumps({"predictions": predictions}).encode())


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(0)


def serve(predict: Predict, metadata: dict, port: int | None = None) -> None:
    """Serve ``predict`` on 0.0.0.0:$PORT (default 8080) until interrupted."""
    if port is None:
        port = int(os.environ.get("PORT") or 8080)
    server = _Server(("0.0.0.0", port), predict, metadata)
    # As PID 1 in a container, SIGTERM has no default action: exit cleanly on it.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    print(f"serving {metadata.get('name', 'model')} on port {port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        sys.stdout.flush()
