"""What only the S3 store does: multipart streaming, paginated listing, the download cache,
presigned POST uploads, and the factory that picks a store from a URL. Every request goes to
moto's server on 127.0.0.1 (tests/s3.py); the shared contract is in test_blobs.py."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests
from boto3.s3.transfer import TransferConfig

from store.blobs import LocalBlobStore, default_blob_store, open_blob_store
from store.s3 import S3BlobStore

MiB = 1 << 20


@pytest.fixture
def store(s3: Any, tmp_path: Path) -> S3BlobStore:
    small_parts = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    return S3BlobStore(
        s3.bucket,
        f"t-{uuid.uuid4().hex[:12]}/",
        cache_dir=tmp_path / "cache",
        client=s3.client(),
        transfer=small_parts,
    )


class _Stream(io.RawIOBase):
    """``size`` pseudo-random bytes produced on demand (never held whole), recording the
    largest read; ``fail_at`` raises once that many bytes were produced."""

    def __init__(self, size: int, fail_at: int | None = None) -> None:
        self.size, self.fail_at = size, fail_at
        self.produced = self.largest_read = 0
        self.digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self.fail_at is not None and self.produced >= self.fail_at:
            raise ConnectionResetError("client went away")
        size = min(size if size >= 0 else MiB, MiB, self.size - self.produced)
        self.largest_read = max(self.largest_read, size)
        data = hashlib.sha256(str(self.produced).encode()).digest() * (size // 32 + 1)
        data = data[:size]
        self.produced += size
        self.digest.update(data)
        return data


def test_large_stream_is_uploaded_in_parts_and_reads_back_intact(store: S3BlobStore) -> None:
    source = _Stream(12 * MiB + 123)
    assert store.put_file("uploads/big.tar", source) == 12 * MiB + 123  # type: ignore[arg-type]
    assert source.largest_read <= MiB  # streamed, never read whole
    head = store.client.head_object(Bucket=store.bucket, Key=store.prefix + "uploads/big.tar")
    assert head["ETag"].strip('"').endswith("-3")  # three parts of 5, 5 and 2 MiB
    assert hashlib.sha256(store.get_bytes("uploads/big.tar")).digest() == source.digest.digest()
    local = store.local_path("uploads/big.tar")
    assert hashlib.sha256(local.read_bytes()).digest() == source.digest.digest()


def test_a_stream_failing_after_some_parts_aborts_the_upload(store: S3BlobStore) -> None:
    store.put_bytes("uploads/big.tar", b"old")
    with pytest.raises(ConnectionResetError):
        store.put_file("uploads/big.tar", _Stream(12 * MiB, fail_at=11 * MiB))  # type: ignore[arg-type]
    assert store.get_bytes("uploads/big.tar") == b"old"
    uploads = store.client.list_multipart_uploads(Bucket=store.bucket, Prefix=store.prefix)
    assert uploads.get("Uploads", []) == []


def test_keys_are_listed_across_pages(store: S3BlobStore) -> None:
    store.page_size = 2
    for index in range(5):
        store.put_bytes(f"sets/{index}", b"x")
    store.put_bytes("other/x", b"x")
    assert list(store.keys("sets/")) == [f"sets/{index}" for index in range(5)]
    assert len(list(store.keys())) == 6


def test_local_path_downloads_once_into_the_cache(store: S3BlobStore, tmp_path: Path) -> None:
    store.put_bytes("sets/a.jsonl", b"{}\n")
    path = store.local_path("sets/a.jsonl")
    assert path.is_relative_to(tmp_path / "cache") and path.read_bytes() == b"{}\n"
    store.client.delete_object(Bucket=store.bucket, Key=store.prefix + "sets/a.jsonl")
    assert store.local_path("sets/a.jsonl") == path  # immutable: the copy is reused
    assert [p.name for p in path.parent.iterdir()] == ["a.jsonl"]  # no temporary left


def _policy(fields: dict[str, str]) -> dict[str, Any]:
    return dict(json.loads(base64.b64decode(fields["policy"])))


def test_presigned_post_uploads_straight_to_the_bucket(store: S3BlobStore) -> None:
    upload = store.presigned_upload("uploads/direct.tar", expires_s=600, max_bytes=1000)
    assert upload.url.startswith("http://127.0.0.1:")
    assert ["content-length-range", 0, 1000] in _policy(dict(upload.fields))["conditions"]
    reply = requests.post(
        upload.url, data=upload.fields, files={"file": ("direct.tar", b"tarball")}, timeout=10
    )
    assert reply.status_code in (200, 201, 204), reply.text
    assert store.get_bytes("uploads/direct.tar") == b"tarball"


def test_presigned_upload_checks_its_arguments(store: S3BlobStore) -> None:
    with pytest.raises(ValueError, match="expires_s"):
        store.presigned_upload("k", expires_s=0)
    with pytest.raises(ValueError, match="max_bytes"):
        store.presigned_upload("k", max_bytes=-1)
    with pytest.raises(ValueError, match="invalid blob key"):
        store.presigned_upload("../k")


def test_factory_opens_s3_from_the_environment(s3: Any, data_dir: Path) -> None:
    # endpoint, region and keys reach boto3 from the AWS_* variables the fixture set
    blobs = open_blob_store(f"s3://{s3.bucket}/factory/{uuid.uuid4().hex[:8]}")
    assert isinstance(blobs, S3BlobStore) and blobs.presigned_uploads
    blobs.put_bytes("a", b"1")
    assert blobs.get_bytes("a") == b"1"
    assert blobs.local_path("a").is_relative_to(data_dir / "blob-cache")


def test_factory_opens_local_folders(tmp_path: Path) -> None:
    for url in (str(tmp_path / "a"), f"file://{tmp_path / 'b'}"):
        blobs = open_blob_store(url)
        assert isinstance(blobs, LocalBlobStore) and blobs.root.is_dir()


def test_default_store_follows_the_settings(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no ./dynaeval.toml of the developer's
    monkeypatch.delenv("DYNAEVAL_STORE_URL", raising=False)
    local = default_blob_store(tmp_path / "data")
    assert isinstance(local, LocalBlobStore) and local.root == tmp_path / "data" / "blobs"
    monkeypatch.setenv("DYNAEVAL_STORE_URL", f"s3://{s3.bucket}/deploy")
    remote = default_blob_store(tmp_path / "data")
    assert isinstance(remote, S3BlobStore) and remote.prefix == "deploy/"
