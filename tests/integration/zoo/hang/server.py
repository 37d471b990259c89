"""Healthy, but /predict blocks forever."""

import threading

from zoo_server import serve


def predict(instances: list[dict]) -> list[dict]:
    print("hanging on purpose", flush=True)
    threading.Event().wait()
    return []


serve(predict)
