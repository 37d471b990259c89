"""Calibration server written the way many researchers write one: the standard library's
``http.server``, HTTP/1.1 keep-alive, headers and body as two writes, Nagle left on.

    DYNAEVAL_CAL_SERVICE_MS=4 DYNAEVAL_CAL_RESIDENT_MIB=300 PORT=8080 python3 stdlib_server.py

Knobs: calibration.py. Deliberately no ``disable_nagle_algorithm``: the evaluator must
measure this server's service time anyway (evaluator/transport/quickack.py).
"""

from __future__ import annotations

import json
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import calibration  # the shared knobs, beside this file (in the image too)


class Handler(BaseHTTPRequestHandler):
    """GET /health, POST /predict."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: a line per request would only fill the log."""

    def reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()  # the first write: status line and headers
        self.wfile.write(data)  # the second: the body

    def do_GET(self) -> None:
        if self.path == "/health":
            self.reply(200, {"status": "ok"})
        else:
            self.reply(404, {"error": "not found"})

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/predict":
            self.reply(404, {"error": "not found"})
            return
        self.reply(200, {"predictions": calibration.predict(request["instances"])})


def main() -> None:
    calibration.hold_resident()  # before listening: ready means padded
    server = ThreadingHTTPServer(calibration.address(), Handler)
    server.daemon_threads = True
    # As PID 1 in a container SIGTERM has no default action: make it end the server.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    print(f"calibration (stdlib) on {server.server_address}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
