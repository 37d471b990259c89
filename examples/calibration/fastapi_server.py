"""Calibration server written the FastAPI way: a pydantic request model, a plain ``def``
endpoint (run in FastAPI's thread pool), served by uvicorn.

    DYNAEVAL_CAL_SERVICE_MS=4 DYNAEVAL_CAL_RESIDENT_MIB=300 PORT=8080 python3 fastapi_server.py

Knobs: calibration.py.
"""

from __future__ import annotations

from typing import Any

import calibration  # the shared knobs, beside this file (in the image too)
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel

app = FastAPI(title="calibration (fastapi)")


class PredictRequest(BaseModel):
    """Protocol v1's request body."""

    task: str = ""
    instances: list[dict[str, Any]]


@app.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/predict")
def predict(request: PredictRequest) -> dict[str, Any]:
    return {"predictions": calibration.predict(request.instances)}


def main() -> None:
    calibration.hold_resident()  # before listening: ready means padded
    host, port = calibration.address()
    print(f"calibration (fastapi) on {host}:{port}", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
