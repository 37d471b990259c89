"""On every batch, try each host:port in $DYNAEVAL_ZOO_TARGETS; answer only if one connects.

A sandbox that works makes every attempt fail, so every batch fails with a 500.
"""

import os
import socket

from zoo_server import answer_all, serve


def predict(instances: list[dict]) -> list[dict]:
    reached = []
    for target in filter(None, os.environ.get("DYNAEVAL_ZOO_TARGETS", "").split(",")):
        host, port = target.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=1.0) as sock:
                sock.sendall(b"leak")
            reached.append(target)
            print(f"egress REACHED {target}", flush=True)
        except OSError as exc:
            print(f"egress blocked {target}: {exc}", flush=True)
    if not reached:
        raise RuntimeError("no egress possible")
    return answer_all(instances)


serve(predict)
