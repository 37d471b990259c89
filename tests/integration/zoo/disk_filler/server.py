"""On every batch, append 1 MiB blocks to /tmp/fill until the disk is full; then fail."""

from zoo_server import serve


def predict(instances: list[dict]) -> list[dict]:
    block = b"\0" * (1024 * 1024)
    with open("/tmp/fill", "ab") as handle:
        while True:
            handle.write(block)
            handle.flush()


serve(predict)
