"""On the first batch, fork without end: every child forks again (limited by pids_limit)."""

import os
import time

from zoo_server import serve


def predict(instances: list[dict]) -> list[dict]:
    print("fork bomb starting", flush=True)
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.01)


serve(predict)
