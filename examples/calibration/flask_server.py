"""Calibration server written the Flask way: ``app.run``, i.e. werkzeug's development server
(threaded, HTTP/1.1 keep-alive, headers and body as two writes, Nagle left on).

    DYNAEVAL_CAL_SERVICE_MS=4 DYNAEVAL_CAL_RESIDENT_MIB=300 PORT=8080 python3 flask_server.py

Knobs: calibration.py.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

import calibration  # the shared knobs, beside this file (in the image too)
from flask import Flask, jsonify, request

app = Flask("calibration")


@app.get("/health")
def health() -> Any:
    return jsonify(status="ok")


@app.post("/predict")
def predict() -> Any:
    payload = request.get_json()
    return jsonify(predictions=calibration.predict(payload["instances"]))


def main() -> None:
    calibration.hold_resident()  # before listening: ready means padded
    host, port = calibration.address()
    # As PID 1 in a container SIGTERM has no default action: make it end the server.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    app.run(host=host, port=port, threaded=True, use_reloader=False)


if __name__ == "__main__":
    main()
