"""A 2 GiB image through the API on both blob stores: a sparse `docker save` tarball sent by
the SDK as a resumable upload to a real HTTP server on 127.0.0.1, joined, inspected from the
blob store and submitted, while the process's resident memory stays flat (it holds one part,
never the image)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from boto3.s3.transfer import TransferConfig
from werkzeug.serving import make_server

from api.app import create_app
from benchmarks.bench_upload import PeakRss, sparse_image
from client.sdk import DynaevalClient
from store.models import ModelRow
from store.s3 import DOWNLOAD_TRANSFER
from tests.unit.auth_helpers import issue_token
from tests.unit.test_blobs import s3_store
from usecases.service import Service

GiB = 1 << 30
MiB = 1 << 20
IMAGE_BYTES = 2 * GiB  # the default image limit, exactly
MAX_RSS_GROWTH = 200 * MiB  # the issue's bound for the API process during a 2 GiB upload
# The inspection fetches the joined image in one GET here, not in 64 MiB ranges: moto's
# server reads a whole object for every ranged GET (the test took 97 s, 36 s in one GET:
# it read 2 GiB 32 times over), where S3 reads the range. The ranged download has its own
# test (tests/unit/test_blobs.py); memory stays flat either way, as the body is streamed.
ONE_GET = TransferConfig(
    multipart_threshold=4 * GiB,
    max_concurrency=DOWNLOAD_TRANSFER.max_concurrency,
    max_io_queue=DOWNLOAD_TRANSFER.max_io_queue,
)

# 30 s on the folder, up to 3 min on S3: handed out with the first integration tests, not
# beside the chaos runs that follow them (tests/conftest.py), whose SQLite commits its
# gigabytes of writes would hold up
pytestmark = pytest.mark.slow


@pytest.fixture(params=["local", "s3"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Service]]:
    service = Service.open(tmp_path / "data")
    assert service.tasks["sentiment"].limits.max_image_bytes == IMAGE_BYTES
    if request.param == "s3":
        service.blobs = s3_store(request.getfixturevalue("s3"), tmp_path, download=ONE_GET)
    server = make_server("127.0.0.1", 0, create_app(service), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", service
    finally:
        server.shutdown()
        thread.join(timeout=30)
        server.server_close()
        service.close()


@pytest.mark.timeout(900)
def test_a_2_gib_image_is_uploaded_in_parts_with_flat_memory(
    server: tuple[str, Service], tmp_path: Path
) -> None:
    url, service = server
    tarball = tmp_path / "big.tar"
    size = sparse_image(tarball, IMAGE_BYTES)
    assert size == IMAGE_BYTES and tarball.stat().st_blocks * 512 < 16 * MiB  # truly sparse
    api = DynaevalClient(url, api_key=issue_token(service, "alice", "researcher"))
    reported: list[int] = []
    started = time.monotonic()
    with PeakRss() as rss:
        made = api.submit_image(
            "sentiment", "big", tarball, progress=lambda done, _all: reported.append(done)
        )
    assert made["status"] == "queued", made
    assert reported[-1] == size and len(reported) == 1 + -(-size // service.upload_part_bytes)
    with service.db.session() as session:
        model = session.get(ModelRow, made["id"])
        assert model is not None
        blob = model.runtime["blob"]
    assert service.blobs.local_path(blob).stat().st_size == size
    # client and server share this process: both together stay under the API's bound
    assert rss.growth < MAX_RSS_GROWTH, (
        f"resident memory grew {rss.growth / MiB:.0f} MiB during the upload "
        f"({time.monotonic() - started:.0f} s)"
    )
