"""On the first batch, allocate and touch 16 MiB blocks until killed."""

from zoo_server import serve

hoard: list[bytearray] = []


def predict(instances: list[dict]) -> list[dict]:
    print("allocating without end", flush=True)
    while True:
        hoard.append(bytearray(b"x" * (16 * 1024 * 1024)))


serve(predict)
