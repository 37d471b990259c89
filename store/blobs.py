"""Blob store: immutable named byte objects (datasets, perturbed sets, images, logs).

The local-folder store is the embedded default; an S3 store (``store/s3.py``) implements the
same interface. Writes are atomic: a reader sees the whole object or none of it.
``open_blob_store`` picks one from a folder path, ``file:///path`` or ``s3://bucket/prefix``.
"""

from __future__ import annotations

import abc
import io
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from configs.settings import LocalLocation, Settings, load_settings, parse_store_url

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-/]{0,511}$")


class BlobNotFound(KeyError):
    """No blob under that key."""


class UploadUrlsUnsupported(NotImplementedError):
    """This store cannot hand out upload URLs: uploads go through the API process."""


@dataclass(frozen=True)
class PresignedUpload:
    """A browser-style form upload straight to the store: POST ``url`` as
    multipart/form-data with ``fields`` first and the file last (field name ``file``)."""

    url: str
    fields: Mapping[str, str] = field(default_factory=dict)
    max_bytes: int | None = None
    expires_s: int = 3600


def check_key(key: str) -> str:
    """Reject keys that could escape the store ('..', absolute paths, odd characters)."""
    if not _KEY.match(key) or ".." in key.split("/") or "//" in key:
        raise ValueError(f"invalid blob key {key!r}")
    return key


class BlobStore(abc.ABC):
    """Interface every blob store implements."""

    presigned_uploads = False  # whether presigned_upload() works on this store

    def presigned_upload(
        self, key: str, expires_s: int = 3600, max_bytes: int | None = None
    ) -> PresignedUpload:
        """A time-limited upload to ``key`` that bypasses the API process (size capped at
        ``max_bytes``); raises UploadUrlsUnsupported where ``presigned_uploads`` is False."""
        raise UploadUrlsUnsupported(
            f"{type(self).__name__} has no upload URLs: send the bytes through the API"
        )

    @abc.abstractmethod
    def put_bytes(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` atomically (overwrites)."""

    @abc.abstractmethod
    def put_file(self, key: str, source: BinaryIO) -> int:
        """Stream a file-like object into ``key``; returns the number of bytes stored."""

    @abc.abstractmethod
    def get_bytes(self, key: str) -> bytes:
        """The bytes under ``key``; raises BlobNotFound."""

    @abc.abstractmethod
    def exists(self, key: str) -> bool:
        """Whether ``key`` holds a blob."""

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key`` if present."""

    @abc.abstractmethod
    def local_path(self, key: str) -> Path:
        """A local file holding the blob (downloaded first by remote stores)."""

    @abc.abstractmethod
    def keys(self, prefix: str = "") -> Iterator[str]:
        """All keys starting with ``prefix``."""


class LocalBlobStore(BlobStore):
    """Blobs as files under one root folder."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def put_bytes(self, key: str, data: bytes) -> None:
        self.put_file(key, io.BytesIO(data))

    def put_file(self, key: str, source: BinaryIO) -> int:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        size = 0
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as tmp:
                while chunk := source.read(1 << 20):
                    tmp.write(chunk)
                    size += len(chunk)
            os.replace(name, path)
        except BaseException:  # a failed or refused write leaves nothing behind
            Path(name).unlink(missing_ok=True)
            raise
        return size

    def get_bytes(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise BlobNotFound(key) from None

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def local_path(self, key: str) -> Path:
        path = self._path(key)
        if not path.is_file():
            raise BlobNotFound(key)
        return path

    def keys(self, prefix: str = "") -> Iterator[str]:
        for path in sorted(self.root.rglob("*")):
            if path.is_file() and not path.name.startswith(".tmp-"):
                key = path.relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    yield key


def open_blob_store(
    url_or_path: str | os.PathLike[str], settings: Settings | None = None
) -> BlobStore:
    """The store at a folder path, ``file:///path`` or ``s3://bucket/prefix``; S3 connection
    options and the download cache folder come from ``settings`` (default: loaded now)."""
    location = parse_store_url(os.fspath(url_or_path), Path.cwd())
    if isinstance(location, LocalLocation):
        return LocalBlobStore(location.path)
    from store.s3 import S3BlobStore  # boto3 is imported only by deployments using S3

    settings = settings or load_settings()
    cache = settings.data_dir / "blob-cache" / location.bucket / location.prefix
    return S3BlobStore(location.bucket, location.prefix, cache_dir=cache, options=settings.s3)


def default_blob_store(data_dir: Path | None = None) -> BlobStore:
    """The settings' store (``$DYNAEVAL_STORE_URL``, the settings file), else the folder
    ``blobs`` in ``data_dir`` (default: the settings' data folder)."""
    settings = load_settings()
    if settings.is_default("store_url"):
        return LocalBlobStore((data_dir or settings.data_dir) / "blobs")
    return open_blob_store(settings.store_url, settings)
