"""The blob store contract, on the local folder and on S3 (moto's server on 127.0.0.1):
atomic writes, safe keys, nothing left behind by a failed write."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from boto3.s3.transfer import TransferConfig

from store.blobs import (
    TEMPORARY_PREFIX,
    UNFINISHED_AFTER_S,
    BlobNotFound,
    BlobStore,
    LocalBlobStore,
    UploadUrlsUnsupported,
    check_key,
)


def s3_store(server: Any, tmp_path: Path, download: TransferConfig | None = None) -> BlobStore:
    """An S3 store under a prefix of its own in the session's bucket (``download``: its
    ``TransferConfig`` for fetching blobs, when not the store's own)."""
    from store.s3 import S3BlobStore

    prefix = f"t-{uuid.uuid4().hex[:12]}"
    cache_dir = tmp_path / "cache"
    return S3BlobStore(
        server.bucket, prefix, cache_dir=cache_dir, client=server.client(), download=download
    )


@pytest.fixture(params=["local", "s3"])
def blobs(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    if request.param == "local":
        return LocalBlobStore(tmp_path / "blobs")
    return s3_store(request.getfixturevalue("s3"), tmp_path)


def leftovers(blobs: BlobStore) -> list[Any]:
    """Temporary files (local) or unfinished multipart uploads (S3) under the store."""
    if isinstance(blobs, LocalBlobStore):
        return [p for p in blobs.root.rglob("*") if p.is_file()]
    from store.s3 import S3BlobStore

    assert isinstance(blobs, S3BlobStore)
    reply = blobs.client.list_multipart_uploads(Bucket=blobs.bucket, Prefix=blobs.prefix)
    return list(reply.get("Uploads", []))


def test_put_get_exists_delete(blobs: BlobStore) -> None:
    blobs.put_bytes("a/b/c.bin", b"hello")
    assert blobs.exists("a/b/c.bin")
    assert blobs.get_bytes("a/b/c.bin") == b"hello"
    assert blobs.local_path("a/b/c.bin").read_bytes() == b"hello"
    blobs.put_bytes("a/b/c.bin", b"again")  # overwrites
    assert blobs.get_bytes("a/b/c.bin") == b"again"
    blobs.delete("a/b/c.bin")
    assert not blobs.exists("a/b/c.bin")
    blobs.delete("a/b/c.bin")  # deleting twice is fine


def test_missing_key_raises_blob_not_found(blobs: BlobStore) -> None:
    with pytest.raises(BlobNotFound):
        blobs.get_bytes("nope")
    with pytest.raises(BlobNotFound):
        blobs.local_path("nope")
    assert isinstance(BlobNotFound("x"), KeyError)


def test_put_file_streams_and_counts(blobs: BlobStore) -> None:
    data = bytes(range(256)) * 10_000  # > one 1 MiB chunk
    size = blobs.put_file("uploads/x.tar", io.BytesIO(data))
    assert size == len(data)
    assert blobs.get_bytes("uploads/x.tar") == data


def test_local_path_is_reused_and_refreshed_by_a_write(blobs: BlobStore) -> None:
    blobs.put_bytes("sets/a.jsonl", b"one")
    first = blobs.local_path("sets/a.jsonl")
    assert blobs.local_path("sets/a.jsonl") == first
    blobs.put_bytes("sets/a.jsonl", b"two")
    assert blobs.local_path("sets/a.jsonl").read_bytes() == b"two"


def test_keys_with_prefix_and_no_temporaries(blobs: BlobStore) -> None:
    for key in ("uploads/1", "uploads/2", "perturbed/x"):
        blobs.put_bytes(key, b"x")
    assert list(blobs.keys("uploads/")) == ["uploads/1", "uploads/2"]
    assert sorted(blobs.keys()) == ["perturbed/x", "uploads/1", "uploads/2"]


@pytest.mark.parametrize(
    "key",
    [
        "../escape",
        "a/../../b",
        "/abs",
        "",
        "a//b",
        "a\\b",
        ".hidden",
        "a b",
        "x" * 600,
        # the store's own names: a write's temporary file (swept a day later), parts
        "boards/.tmp-x.board",
        "a/.tmp-x",
        "uploads/.parts/x",
        "a/./b",
    ],
)
def test_unsafe_keys_are_refused(blobs: BlobStore, key: str) -> None:
    with pytest.raises(ValueError):
        check_key(key)
    with pytest.raises(ValueError):
        blobs.put_bytes(key, b"x")


class _Exploding(io.RawIOBase):
    """Yields one chunk, then fails like a refused or broken upload."""

    def __init__(self) -> None:
        self.calls = 0

    def read(self, size: int = -1) -> bytes:
        self.calls += 1
        if self.calls > 1:
            raise RuntimeError("connection reset")
        return b"x" * 1000


def test_failed_stream_leaves_nothing_behind(blobs: BlobStore) -> None:
    with pytest.raises(RuntimeError):
        blobs.put_file("uploads/broken.tar", _Exploding())
    assert not blobs.exists("uploads/broken.tar")
    assert leftovers(blobs) == [], "temporary files left behind"


def test_failed_overwrite_keeps_the_old_blob(blobs: BlobStore) -> None:
    blobs.put_bytes("k", b"old")
    with pytest.raises(RuntimeError):
        blobs.put_file("k", _Exploding())
    assert blobs.get_bytes("k") == b"old"


def test_local_store_has_no_upload_urls(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    assert store.presigned_uploads is False
    with pytest.raises(UploadUrlsUnsupported, match="through the API"):
        store.presigned_upload("uploads/x.tar", max_bytes=10)
    assert isinstance(UploadUrlsUnsupported(), NotImplementedError)


_SLOW_WRITER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from store.blobs import LocalBlobStore

class Slow:  # an upload or a board write that never ends: killed half-way
    def read(self, size=-1):
        time.sleep(0.01)
        return b"x" * 1024

LocalBlobStore(sys.argv[2]).put_file("boards/sentiment.board", Slow())
"""


def temporaries(root: Path) -> list[Path]:
    return [p for p in root.rglob(f"{TEMPORARY_PREFIX}*") if p.is_file()]


def test_a_write_killed_half_way_is_swept_once_untouched_for_a_day(tmp_path: Path) -> None:
    """kill -9 during a write leaves its temporary file (no cleanup runs): the store never
    shows it as a blob, and a sweep removes it a day after anything last wrote to it,
    never a write still in progress, never an upload's unfinished parts."""
    root = tmp_path / "blobs"
    repo = Path(__file__).resolve().parents[2]
    writer = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(repo), str(root)])
    try:
        deadline = time.monotonic() + 30
        while not [p for p in temporaries(root) if p.stat().st_size > 0]:
            assert time.monotonic() < deadline, "the writer never started writing"
            time.sleep(0.05)
    finally:
        writer.kill()
        writer.wait()
    store = LocalBlobStore(root)
    [left] = temporaries(root)
    handle = store.start_parts("uploads/big.tar")  # an upload under way, swept by its own
    assert list(store.keys()) == []
    written = left.stat().st_mtime
    assert store.sweep_unfinished(written + 3600) == 0  # it may still be written to
    assert left.exists()
    assert store.sweep_unfinished(written + UNFINISHED_AFTER_S + 1) == 1
    assert temporaries(root) == []
    assert store.stored_parts("uploads/big.tar", handle) == []  # the parts are still there


def test_an_s3_store_sweeps_downloads_killed_half_way_from_its_cache(
    s3: Any, tmp_path: Path
) -> None:
    store = s3_store(s3, tmp_path)
    store.put_bytes("boards/sentiment.board", b"kept")
    folder = tmp_path / "cache" / "boards"
    folder.mkdir(parents=True)
    fd, name = tempfile.mkstemp(dir=folder, prefix=TEMPORARY_PREFIX)  # as a download does
    os.close(fd)
    written = Path(name).stat().st_mtime
    assert store.sweep_unfinished(written + 60) == 0
    assert store.sweep_unfinished(written + UNFINISHED_AFTER_S + 1) == 1
    assert not Path(name).exists()
    assert store.get_bytes("boards/sentiment.board") == b"kept"


def test_an_s3_store_fetches_a_big_blob_in_ranges_into_one_whole_file(
    s3: Any, tmp_path: Path
) -> None:
    """Above its threshold a blob comes down in ranged GETs, several at once, into one
    whole cached file."""
    from store.s3 import S3BlobStore

    MiB = 1 << 20
    ranges = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    store = s3_store(s3, tmp_path, download=ranges)
    assert isinstance(store, S3BlobStore)
    data = os.urandom(12 * MiB + 7)  # three ranges, the last short
    store.put_bytes("uploads/big.tar", data)
    asked: list[str] = []

    def note_range(params: dict[str, Any], **_: Any) -> None:
        asked.append(params.get("Range", ""))

    event = "provide-client-params.s3.GetObject"
    store.client.meta.events.register(event, note_range)
    try:  # the client is the session's: the handler goes with the test
        path = store.local_path("uploads/big.tar")
    finally:
        store.client.meta.events.unregister(event, note_range)
    assert path.read_bytes() == data
    starts = sorted(int(asked_range.split("=")[1].split("-")[0]) for asked_range in asked)
    assert starts == [0, 5 * MiB, 10 * MiB]  # three ranged GETs, the last open-ended
    assert temporaries(tmp_path / "cache") == []
