"""Upload a 2 GiB image to a real ``dynaeval serve`` and watch its memory; print JSON.

A sparse ``docker save`` tarball of ``--gib`` GiB (default 2, the default image limit) is
made in a temporary folder, and a fresh ``dynaeval serve --no-examples --workers 0`` (the
embedded default: SQLite and a local folder, waitress) is started on a free loopback port.
The SDK submits the tarball twice, as a separate process would:

* ``resumable``: in parts of 16 MiB, each with its SHA-256 (what the SDK does from 64 MiB);
* ``one_request``: one multipart POST (the baseline, measured in the same run).

For each, the server process's resident memory is sampled every 20 ms (psutil):
``peak_rss_growth_mib`` is its peak over what it held before the upload. Also printed: the
wall time and MiB/s from the first byte to the queued submission (inspection included).

Target: the API process's peak stays under 200 MiB during a 2 GiB upload (``peak_rss_mib``,
its whole resident memory, the SQLite service and the app included).

Usage: ``python benchmarks/bench_upload.py [--gib 2]``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from client.sdk import DynaevalClient  # noqa: E402

MiB = 1 << 20
TARGET_PEAK_RSS_MIB = 200


def sparse_image(path: Path, size: int) -> int:
    """A `docker save` tarball of ``size`` bytes (a multiple of 512, at least 4 KiB) whose
    one layer is zeros left as a hole in the file (no disk is used for them)."""
    config_bytes = b'{"os": "linux"}'
    config = hashlib.sha256(config_bytes).hexdigest() + ".json"  # docker save names it so
    manifest = [{"Config": config, "RepoTags": ["big:1"], "Layers": ["l/layer.tar"]}]
    small = {config: config_bytes, "manifest.json": json.dumps(manifest).encode()}
    # three headers, two small members of one block each, the end of the archive
    layer_bytes = size - 3 * 512 - 2 * 512 - 1024
    with path.open("wb") as out:
        for name, data in small.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            out.write(info.tobuf(format=tarfile.USTAR_FORMAT))
            out.write(data + b"\0" * (-len(data) % 512))
        layer = tarfile.TarInfo("l/layer.tar")
        layer.size = layer_bytes
        out.write(layer.tobuf(format=tarfile.USTAR_FORMAT))
        out.seek(layer_bytes + (-layer_bytes % 512), io.SEEK_CUR)  # the hole
        out.write(b"\0" * 1024)  # the end of the archive
        return out.tell()


class PeakRss:
    """A process's resident memory, sampled every 20 ms in a thread: its peak growth."""

    def __init__(self, pid: int | None = None) -> None:
        self.process, self._stop = psutil.Process(pid), threading.Event()
        self.start = self.peak = self._rss()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _rss(self) -> int:
        """The process's own resident memory (not its children's: a test's worker may be
        the parent of moto's server)."""
        return int(self.process.memory_info().rss)

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._rss())

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def growth(self) -> int:
        return max(0, self.peak - self.start)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_serve(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "DYNAEVAL_DATA_DIR": str(data)}
    command = [sys.executable, "-m", "client.cli", "serve", "--port", str(port)]
    command += ["--no-examples", "--workers", "0"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if requests.get(base + "/api/v1/health", timeout=2).ok:
                return proc, base
        except requests.ConnectionError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("serve did not come up")
        time.sleep(0.05)


def measure(
    proc: subprocess.Popen[bytes], api: DynaevalClient, tarball: Path, resumable: bool
) -> dict[str, Any]:
    size = tarball.stat().st_size
    started = time.perf_counter()
    with PeakRss(proc.pid) as rss:
        made = api.submit_image("sentiment", f"big-{resumable}", tarball, resumable=resumable)
    seconds = time.perf_counter() - started
    assert made["status"] == "queued", made
    return {
        "peak_rss_mib": round(rss.peak / MiB, 1),
        "peak_rss_growth_mib": round(rss.growth / MiB, 1),
        "rss_before_mib": round(rss.start / MiB, 1),
        "seconds": round(seconds, 1),
        "mib_per_s": round(size / MiB / seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=2.0)
    args = parser.parse_args()
    size = int(args.gib * 1024) * MiB
    with tempfile.TemporaryDirectory(prefix="bench-upload-") as folder:
        tarball = Path(folder) / "big.tar"
        sparse_image(tarball, size)
        proc, base = start_serve(Path(folder) / "data")
        try:
            token = json.loads((Path(folder) / "data" / "local-admin.json").read_text())["token"]
            api = DynaevalClient(base, api_key=token, timeout=600)
            resumable = measure(proc, api, tarball, resumable=True)
            baseline = measure(proc, api, tarball, resumable=False)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(
        json.dumps(
            {
                "image_bytes": size,
                "resumable": resumable,
                "one_request": baseline,
                "ratios_to_one_request": {
                    key: round(resumable[key] / baseline[key], 2) if baseline[key] else None
                    for key in ("peak_rss_growth_mib", "seconds")
                },
                "target_peak_rss_mib": TARGET_PEAK_RSS_MIB,
                "met": resumable["peak_rss_mib"] < TARGET_PEAK_RSS_MIB,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
