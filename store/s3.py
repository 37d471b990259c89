"""The S3 blob store: the BlobStore interface over boto3 (AWS S3, MinIO, moto in the tests).

Objects live under ``prefix`` in one bucket. Large files are uploaded in parts by boto3's
managed transfer, never read whole into memory; ``local_path`` downloads into a cache folder
(atomically) and reuses the copy, since blobs are immutable once their key is published.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, BinaryIO, cast

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError, ProfileNotFound

from configs.settings import S3Options, SettingsError
from store.blobs import (
    TEMPORARY_PREFIX,
    UNFINISHED_AFTER_S,
    BlobNotFound,
    BlobStore,
    PartsNotFound,
    PresignedUpload,
    StoredPart,
    check_key,
    copy_exactly,
    sweep_temporary_files,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

MiB = 1 << 20
# Parts of 8 MiB, a few in flight: a stream's memory stays near 6 parts whatever its size.
DEFAULT_TRANSFER = TransferConfig(
    multipart_threshold=8 * MiB,
    multipart_chunksize=8 * MiB,
    max_concurrency=4,
    max_io_queue=8,
)
# Downloads in ranges of 64 MiB: fewer requests (each costs a round trip, and S3-compatible
# servers more), and memory still flat, since ranges are written through a small I/O queue.
DOWNLOAD_TRANSFER = TransferConfig(
    multipart_threshold=64 * MiB,
    multipart_chunksize=64 * MiB,
    max_concurrency=4,
    max_io_queue=8,
)
MAX_PRESIGN_S = 7 * 24 * 3600  # SigV4 signatures are valid at most a week
_MISSING = {"404", "NoSuchKey", "NotFound"}
_NO_UPLOAD = {"404", "NoSuchUpload"}


def make_client(options: S3Options) -> S3Client:
    """An S3 client from the options that are set; boto3's chain supplies the rest."""
    try:
        session = boto3.session.Session(
            profile_name=options.profile,
            aws_access_key_id=options.access_key_id,
            aws_secret_access_key=options.secret_access_key,
            aws_session_token=options.session_token,
            region_name=options.region,
        )
    except ProfileNotFound as exc:
        raise SettingsError("S3 connection", "s3.profile", str(exc)) from None
    config = Config(retries={"mode": "standard", "max_attempts": 5})
    return session.client("s3", endpoint_url=options.endpoint_url, config=config)


def _missing(exc: ClientError) -> bool:
    return str(exc.response.get("Error", {}).get("Code")) in _MISSING


class _FullReads:
    """Counts what is read and makes every ``read(n)`` return n bytes until the end: the
    transfer cuts parts from single reads, and S3 refuses short parts but the last."""

    def __init__(self, source: BinaryIO) -> None:
        self.source = source
        self.size = 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            data = self.source.read()
        else:
            chunks, left = [], size
            while left > 0 and (chunk := self.source.read(left)):
                chunks.append(chunk)
                left -= len(chunk)
            data = b"".join(chunks)
        self.size += len(data or b"")
        return data or b""


class S3BlobStore(BlobStore):
    """Blobs as objects under ``prefix`` in ``bucket``."""

    presigned_uploads = True
    min_part_bytes = 5 * MiB  # S3 refuses smaller parts but the last

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        cache_dir: str | os.PathLike[str],
        options: S3Options | None = None,
        client: S3Client | None = None,
        transfer: TransferConfig | None = None,
        download: TransferConfig | None = None,
    ) -> None:
        """``transfer``: how streams are uploaded; ``download``: how a blob is fetched into
        the local cache (``local_path``)."""
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.cache_dir = Path(cache_dir)
        self.client = client or make_client(options or S3Options())
        self.transfer = transfer or DEFAULT_TRANSFER
        self.download = download or DOWNLOAD_TRANSFER
        self.page_size = 1000  # keys() asks for this many per request (S3's maximum)

    def __repr__(self) -> str:
        return f"S3BlobStore(s3://{self.bucket}/{self.prefix})"

    def _key(self, key: str) -> str:
        return self.prefix + check_key(key)

    def _forget_cached(self, key: str) -> None:
        (self.cache_dir / key).unlink(missing_ok=True)

    def put_bytes(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)
        self._forget_cached(key)

    def put_file(self, key: str, source: BinaryIO) -> int:
        # An object appears only when its single PUT or the multipart completion succeeds;
        # a failed stream aborts the multipart upload, so the old blob (if any) stays.
        reader = _FullReads(source)
        stream = cast("IO[bytes]", reader)  # it has the one method the transfer uses: read
        self.client.upload_fileobj(stream, self.bucket, self._key(key), Config=self.transfer)
        self._forget_cached(key)
        return reader.size

    def get_bytes(self, key: str) -> bytes:
        try:
            reply = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if _missing(exc):
                raise BlobNotFound(key) from None
            raise
        return reply["Body"].read()

    def exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if _missing(exc):
                return False
            raise
        return True

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        self._forget_cached(key)

    def sweep_unfinished(self, now: float, older_than_s: float = UNFINISHED_AFTER_S) -> int:
        """Downloads into the local cache that never finished (the bucket holds no
        temporary objects: an unfinished multipart upload is its upload's to abort)."""
        if not self.cache_dir.is_dir():
            return 0
        return sweep_temporary_files(self.cache_dir, now, older_than_s)

    def local_path(self, key: str) -> Path:
        path = self.cache_dir / check_key(key)
        if path.is_file():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=TEMPORARY_PREFIX)
        try:
            with os.fdopen(fd, "wb") as tmp:
                self.client.download_fileobj(self.bucket, self._key(key), tmp, Config=self.download)
            os.replace(name, path)  # readers see a whole copy or none
        except ClientError as exc:
            Path(name).unlink(missing_ok=True)
            if _missing(exc):
                raise BlobNotFound(key) from None
            raise
        except BaseException:
            Path(name).unlink(missing_ok=True)
            raise
        return path

    def keys(self, prefix: str = "") -> Iterator[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket,
            Prefix=self.prefix + prefix,
            PaginationConfig={"PageSize": self.page_size},
        )
        for page in pages:
            for item in page.get("Contents", []):
                key = item["Key"][len(self.prefix) :]
                if _valid(key):  # objects other tools put there are not ours to hand out
                    yield key

    # Parts are S3's own multipart upload: the handle is its UploadId, each part one
    # UploadPart (at least 5 MiB but the last, which the use case's part size sees to).
    def start_parts(self, key: str) -> str:
        reply = self.client.create_multipart_upload(Bucket=self.bucket, Key=self._key(key))
        return reply["UploadId"]

    def put_part(
        self, key: str, handle: str, number: int, offset: int, source: BinaryIO, size: int
    ) -> None:
        with _exactly(source, size) as body, self._known_upload(handle):
            self.client.upload_part(
                Bucket=self.bucket,
                Key=self._key(key),
                UploadId=handle,
                PartNumber=number,
                Body=body,
                ContentLength=size,
            )

    def stored_parts(self, key: str, handle: str) -> list[StoredPart]:
        return [StoredPart(n, size) for n, size, _ in self._listed_parts(key, handle)]

    def finish_parts(self, key: str, handle: str, count: int) -> int:
        listed = self._listed_parts(key, handle)[:count]
        if [n for n, _, _ in listed] != list(range(1, count + 1)):
            raise ValueError(f"parts 1..{count} are not all stored")
        with self._known_upload(handle):
            self.client.complete_multipart_upload(
                Bucket=self.bucket,
                Key=self._key(key),
                UploadId=handle,
                MultipartUpload={"Parts": [{"PartNumber": n, "ETag": tag} for n, _, tag in listed]},
            )
        self._forget_cached(key)
        return sum(size for _, size, _ in listed)

    def abort_parts(self, key: str, handle: str) -> None:
        with suppress(PartsNotFound), self._known_upload(handle):
            self.client.abort_multipart_upload(
                Bucket=self.bucket, Key=self._key(key), UploadId=handle
            )

    def _listed_parts(self, key: str, handle: str) -> list[tuple[int, int, str]]:
        """(number, size, ETag) of every stored part, page by page."""
        pages = self.client.get_paginator("list_parts").paginate(
            Bucket=self.bucket, Key=self._key(key), UploadId=handle
        )
        with self._known_upload(handle):
            return [
                (part["PartNumber"], part["Size"], part["ETag"])
                for page in pages
                for part in page.get("Parts", [])
            ]

    @contextmanager
    def _known_upload(self, handle: str) -> Iterator[None]:
        try:
            yield
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in _NO_UPLOAD:
                raise PartsNotFound(handle) from None
            raise

    def presigned_upload(
        self, key: str, expires_s: int = 3600, max_bytes: int | None = None
    ) -> PresignedUpload:
        """A presigned POST; S3 refuses a body over ``max_bytes`` (content-length-range)."""
        if not 0 < expires_s <= MAX_PRESIGN_S:
            raise ValueError(f"expires_s must be in 1..{MAX_PRESIGN_S}, not {expires_s}")
        conditions: list[Any] = []
        if max_bytes is not None:
            if max_bytes < 0:
                raise ValueError(f"max_bytes must be >= 0, not {max_bytes}")
            conditions.append(["content-length-range", 0, max_bytes])
        post = self.client.generate_presigned_post(
            Bucket=self.bucket, Key=self._key(key), Conditions=conditions, ExpiresIn=expires_s
        )
        return PresignedUpload(post["url"], dict(post["fields"]), max_bytes, expires_s)


@contextmanager
def _exactly(source: BinaryIO, size: int) -> Iterator[IO[bytes]]:
    """A seekable file holding ``size`` bytes of ``source`` from where it stands (botocore
    seeks a body to sign and retry it): the source itself when it holds exactly that, else
    a copy in a temporary file. ShortPart if it ends before."""
    exact = False
    with suppress(OSError, ValueError, AttributeError):  # not seekable: copy it
        start = source.tell()
        exact = source.seek(0, os.SEEK_END) - start == size
        source.seek(start)
    if exact:
        yield source  # outside the suppress: the upload's own errors stay its own
        return
    with tempfile.SpooledTemporaryFile(max_size=MiB) as spool:
        copy_exactly(source, cast("IO[bytes]", spool), size)
        spool.seek(0)
        yield cast("IO[bytes]", spool)


def _valid(key: str) -> bool:
    try:
        check_key(key)
    except ValueError:
        return False
    return True
