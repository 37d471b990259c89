"""Blob store: immutable named byte objects (datasets, perturbed sets, images, logs).

The local-folder store is the embedded default; an S3 store (``store/s3.py``) implements the
same interface. Writes are atomic: a reader sees the whole object or none of it.
``open_blob_store`` picks one from a folder path, ``file:///path`` or ``s3://bucket/prefix``.
"""

from __future__ import annotations

import abc
import fcntl
import io
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, BinaryIO

from configs.settings import LocalLocation, Settings, load_settings, parse_store_url

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-/]{0,511}$")
_LOCAL_HANDLE = re.compile(r"^[0-9a-f]{32}$")
COPY_BYTES = 1 << 20  # what one read of a stream takes: memory stays flat whatever the size


TEMPORARY_PREFIX = ".tmp-"  # a file being written; renamed to its key once whole
UNFINISHED_AFTER_S = 24 * 3600.0  # a temporary file nothing wrote to for this long is dead


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


@dataclass(frozen=True)
class StoredPart:
    """One part of a blob written in parts: its number (from 1) and its size in bytes."""

    number: int
    size: int


class PartsNotFound(KeyError):
    """No unfinished blob under that handle (finished, aborted or never started)."""


class ShortPart(ValueError):
    """A part's source ended before the size it was stored with."""


def check_key(key: str) -> str:
    """Reject keys that could escape the store ('..', absolute paths, odd characters), and
    any whose folder or file name starts with '.': those names are the store's own (a
    write's temporary file, an upload's parts), never a blob."""
    parts = key.split("/")
    if not _KEY.match(key) or "//" in key or any(part.startswith(".") for part in parts):
        raise ValueError(f"invalid blob key {key!r}")
    return key


class BlobStore(abc.ABC):
    """Interface every blob store implements."""

    presigned_uploads = False  # whether presigned_upload() works on this store
    min_part_bytes = 1  # the smallest part put_part takes but a blob's last

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

    # A blob written in parts: a resumable upload sends it a part at a time, over requests
    # that may fail and be sent again; nothing is visible under the key until it is finished.
    @abc.abstractmethod
    def start_parts(self, key: str) -> str:
        """Begin a blob written part by part under ``key``; returns the handle naming it."""

    @abc.abstractmethod
    def put_part(
        self, key: str, handle: str, number: int, offset: int, source: BinaryIO, size: int
    ) -> None:
        """Store part ``number`` (from 1): ``size`` bytes read from ``source``, which are
        the blob's bytes from ``offset``. Whole or not at all (ShortPart when the source
        ends early); sending a part again replaces it."""

    @abc.abstractmethod
    def stored_parts(self, key: str, handle: str) -> list[StoredPart]:
        """The parts stored so far, by number; PartsNotFound for an unknown handle."""

    @abc.abstractmethod
    def finish_parts(self, key: str, handle: str, count: int) -> int:
        """Publish parts 1..``count`` as the blob under ``key`` (the handle ends); returns
        its size. ``count`` must be what stored_parts gave: every part from 1 stored."""

    @abc.abstractmethod
    def abort_parts(self, key: str, handle: str) -> None:
        """Drop an unfinished blob's parts (an unknown handle is fine: nothing to drop)."""

    @abc.abstractmethod
    def sweep_unfinished(self, now: float, older_than_s: float = UNFINISHED_AFTER_S) -> int:
        """Remove what writes that never finished left on this machine (a process killed
        mid-write leaves its temporary file): those untouched for ``older_than_s`` at
        ``now`` (epoch seconds). How many went."""


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
        return _write_atomically(path, source)

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

    def sweep_unfinished(self, now: float, older_than_s: float = UNFINISHED_AFTER_S) -> int:
        return sweep_temporary_files(self.root, now, older_than_s)

    def keys(self, prefix: str = "") -> Iterator[str]:
        for path in sorted(self.root.rglob("*")):
            key = path.relative_to(self.root).as_posix()
            # temporary files and unfinished parts (".parts/") are no blobs yet
            hidden = key.startswith(".") or path.name.startswith(TEMPORARY_PREFIX)
            if path.is_file() and not hidden and key.startswith(prefix):
                yield key

    # Parts are written in place into one file at their offsets, each marked done by a small
    # file written after its bytes reached the disk: finishing renames the file, never copies.
    def _parts_dir(self, handle: str) -> Path:
        if not _LOCAL_HANDLE.match(handle):
            raise PartsNotFound(handle)
        return self.root / ".parts" / handle

    def start_parts(self, key: str) -> str:
        check_key(key)
        handle = os.urandom(16).hex()
        folder = self._parts_dir(handle)
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700)
        os.close(os.open(folder / "data", os.O_CREAT | os.O_WRONLY, 0o600))  # as mkstemp's
        return handle

    def put_part(
        self, key: str, handle: str, number: int, offset: int, source: BinaryIO, size: int
    ) -> None:
        with self._parts_locked(handle) as folder:
            # one writer at a time: two sends of one part must not interleave their bytes
            done = folder / f"part-{number:05d}"
            done.unlink(missing_ok=True)  # its bytes are about to change
            with (folder / "data").open("r+b") as data:
                data.seek(offset)
                copy_exactly(source, data, size)
                data.flush()
                os.fsync(data.fileno())
            _write_atomically(done, io.BytesIO(str(size).encode()))

    def stored_parts(self, key: str, handle: str) -> list[StoredPart]:
        folder = self._existing_parts(handle)
        found = []
        for path in folder.glob("part-*"):
            with suppress(FileNotFoundError):  # being sent again, or the parts just went
                found.append(
                    StoredPart(int(path.name.removeprefix("part-")), int(path.read_text()))
                )
        return sorted(found, key=lambda part: part.number)

    def finish_parts(self, key: str, handle: str, count: int) -> int:
        path = self._path(key)
        with self._parts_locked(handle) as folder:  # no part is being written into it now
            parts = self.stored_parts(key, handle)
            if [part.number for part in parts[:count]] != list(range(1, count + 1)):
                raise ValueError(f"parts 1..{count} are not all stored")
            size = sum(part.size for part in parts[:count])
            path.parent.mkdir(parents=True, exist_ok=True)
            with (folder / "data").open("r+b") as data:
                data.truncate(size)
            os.replace(folder / "data", path)
        shutil.rmtree(folder, ignore_errors=True)
        return size

    def abort_parts(self, key: str, handle: str) -> None:
        with suppress(PartsNotFound), self._parts_locked(handle) as folder:
            shutil.rmtree(folder, ignore_errors=True)

    def _existing_parts(self, handle: str) -> Path:
        folder = self._parts_dir(handle)
        if not (folder / "data").is_file():
            raise PartsNotFound(handle)
        return folder

    @contextmanager
    def _parts_locked(self, handle: str) -> Iterator[Path]:
        """The parts' folder, under an exclusive lock of this blob's writers (processes
        too); PartsNotFound when the blob was finished or dropped meanwhile."""
        folder = self._existing_parts(handle)
        try:
            fd = os.open(folder / "lock", os.O_CREAT | os.O_RDWR, 0o600)
        except FileNotFoundError:  # dropped while we looked
            raise PartsNotFound(handle) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield self._existing_parts(handle)  # finished while we waited: not found
        finally:
            os.close(fd)


def copy_exactly(source: BinaryIO, target: IO[bytes], size: int) -> None:
    """Copy ``size`` bytes of ``source`` into ``target`` a MiB at a time; ShortPart if the
    source ends before."""
    left = size
    while left > 0 and (chunk := source.read(min(left, COPY_BYTES))):
        target.write(chunk)
        left -= len(chunk)
    if left:
        raise ShortPart(f"the part ended {left} bytes short of {size}")


def sweep_temporary_files(root: Path, now: float, older_than_s: float) -> int:
    """Remove ``_write_atomically``'s temporary files under ``root`` that nothing has
    written to for ``older_than_s`` at ``now``: a write in progress keeps its file's
    modification time fresh, a killed one leaves it behind for good. Unfinished parts of
    uploads are not touched (their upload's sweep owns them)."""
    removed = 0
    for folder, subfolders, files in os.walk(root):
        if Path(folder) == root:
            subfolders[:] = [name for name in subfolders if name != ".parts"]
        for name in files:
            if not name.startswith(TEMPORARY_PREFIX):
                continue
            path = Path(folder, name)
            try:
                if path.stat().st_mtime < now - older_than_s:
                    path.unlink()
                    removed += 1
            except OSError:  # its write finished, another sweep took it, or not ours to
                continue  # remove: the others are still swept
    return removed


def _write_atomically(path: Path, source: BinaryIO) -> int:
    """Stream ``source`` into ``path`` through a temporary file beside it (0600): readers
    see the whole file or none, and a failed or refused write leaves nothing behind.
    Returns the bytes written."""
    size = 0
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=TEMPORARY_PREFIX)
    try:
        with os.fdopen(fd, "wb") as tmp:
            while chunk := source.read(COPY_BYTES):
                tmp.write(chunk)
                size += len(chunk)
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return size


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
