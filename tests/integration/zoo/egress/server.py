"""On every batch, try each host:port in $DYNAEVAL_ZOO_TARGETS; answer only if one connects.

``GATEWAY`` as host means the first address of the container's own subnet (the host's side
of the internal network). A sandbox that works makes every attempt fail, so every batch
fails with a 500.
"""

import ipaddress
import os
import socket
import struct

from zoo_server import answer_all, serve


def own_gateway() -> str:
    """The first host address of the subnet in this namespace's routing table."""
    with open("/proc/net/route") as routes:
        for line in list(routes)[1:]:
            fields = line.split()
            if fields[0] != "lo" and fields[1] != "00000000":
                net = struct.pack("<I", int(fields[1], 16))
                mask = struct.pack("<I", int(fields[7], 16))
                cidr = f"{ipaddress.IPv4Address(net)}/{ipaddress.IPv4Address(mask)}"
                return str(next(ipaddress.ip_network(cidr).hosts()))
    return "127.0.0.1"


def predict(instances: list[dict]) -> list[dict]:
    reached = []
    for target in filter(None, os.environ.get("DYNAEVAL_ZOO_TARGETS", "").split(",")):
        host, port = target.rsplit(":", 1)
        host = own_gateway() if host == "GATEWAY" else host
        target = f"{host}:{port}"
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
