"""A minimal protocol-v1 server for the hostile-container zoo (standard library only).

Each zoo model's ``server.py`` calls ``serve(predict, health=...)``; an exception in
``predict`` becomes a 500 reply whose body names it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Predict = Callable[[list[dict]], list[dict]]


def answer_all(instances: list[dict], label: str = "positive") -> list[dict]:
    """A well-formed reply: one prediction per instance, uids kept."""
    return [{"uid": inst.get("uid"), "label": label} for inst in instances]


def serve(predict: Predict, health: Callable[[], int] = lambda: 200) -> None:
    """Serve /health and /predict on 0.0.0.0:$PORT until killed."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: object) -> None:
            pass

        def send(self, status: int, payload: object) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            status = health() if self.path == "/health" else 404
            self.send(status, {"status": status})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                predictions = predict(json.loads(raw)["instances"])
            except Exception as exc:
                print(f"predict failed: {type(exc).__name__}: {exc}", flush=True)
                self.send(500, {"error": str(exc)})
                return
            self.send(200, {"predictions": predictions})

    port = int(os.environ.get("PORT") or 8080)
    print(f"zoo model listening on {port} as uid={os.getuid()}", flush=True)
    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    server.daemon_threads = True
    server.serve_forever()
