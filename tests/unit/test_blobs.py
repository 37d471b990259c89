"""The local blob store: atomic writes, safe keys, nothing left behind by a failed write."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from store.blobs import BlobNotFound, LocalBlobStore, check_key


@pytest.fixture
def blobs(tmp_path: Path) -> LocalBlobStore:
    return LocalBlobStore(tmp_path / "blobs")


def test_put_get_exists_delete(blobs: LocalBlobStore) -> None:
    blobs.put_bytes("a/b/c.bin", b"hello")
    assert blobs.exists("a/b/c.bin")
    assert blobs.get_bytes("a/b/c.bin") == b"hello"
    assert blobs.local_path("a/b/c.bin").read_bytes() == b"hello"
    blobs.put_bytes("a/b/c.bin", b"again")  # overwrites
    assert blobs.get_bytes("a/b/c.bin") == b"again"
    blobs.delete("a/b/c.bin")
    assert not blobs.exists("a/b/c.bin")
    blobs.delete("a/b/c.bin")  # deleting twice is fine


def test_missing_key_raises_blob_not_found(blobs: LocalBlobStore) -> None:
    with pytest.raises(BlobNotFound):
        blobs.get_bytes("nope")
    with pytest.raises(BlobNotFound):
        blobs.local_path("nope")
    assert isinstance(BlobNotFound("x"), KeyError)


def test_put_file_streams_and_counts(blobs: LocalBlobStore) -> None:
    data = bytes(range(256)) * 10_000  # > one 1 MiB chunk
    size = blobs.put_file("uploads/x.tar", io.BytesIO(data))
    assert size == len(data)
    assert blobs.get_bytes("uploads/x.tar") == data


def test_keys_with_prefix_and_no_temporaries(blobs: LocalBlobStore) -> None:
    for key in ("uploads/1", "uploads/2", "perturbed/x"):
        blobs.put_bytes(key, b"x")
    assert list(blobs.keys("uploads/")) == ["uploads/1", "uploads/2"]
    assert sorted(blobs.keys()) == ["perturbed/x", "uploads/1", "uploads/2"]


@pytest.mark.parametrize(
    "key", ["../escape", "a/../../b", "/abs", "", "a//b", "a\\b", ".hidden", "a b", "x" * 600]
)
def test_unsafe_keys_are_refused(blobs: LocalBlobStore, key: str) -> None:
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


def test_failed_stream_leaves_nothing_behind(blobs: LocalBlobStore) -> None:
    with pytest.raises(RuntimeError):
        blobs.put_file("uploads/broken.tar", _Exploding())
    assert not blobs.exists("uploads/broken.tar")
    leftovers = [p for p in blobs.root.rglob("*") if p.is_file()]
    assert leftovers == [], f"temporary files left behind: {leftovers}"


def test_failed_overwrite_keeps_the_old_blob(blobs: LocalBlobStore) -> None:
    blobs.put_bytes("k", b"old")
    with pytest.raises(RuntimeError):
        blobs.put_file("k", _Exploding())
    assert blobs.get_bytes("k") == b"old"
