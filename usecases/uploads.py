"""Resumable uploads: a model image of many gigabytes sent in parts, then submitted.

A researcher starts an upload (its size and file name), sends parts 1..n of ``part_bytes``
each (the last one shorter) in any order and as often as a dropped connection needs, asks
which parts arrived to resume, and submits the upload as a model. Each part is checked
against its SHA-256 when the client gives one, held on disk while it arrives (memory stays
flat) and stored in the blob store as a part (S3: a multipart upload). Submitting joins the
parts, inspects the tarball from the blob store and makes the submission under the same
idempotency and quota rules as a one-request upload; an upload becomes one submission only.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import tempfile
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import IO, BinaryIO, cast

from configs.schema import TaskSpec
from configs.vocabulary.capabilities import Requirements
from configs.vocabulary.refusals import Refused
from evaluator.transport.dialects import DEFAULT_DIALECT
from store.blobs import PartsNotFound
from store.locks import named_lock
from store.rules.principals import Principal
from store.uploads import UploadRecord, Uploads, UploadState
from usecases.service import Service
from usecases.submissions import (
    Admission,
    Submitted,
    create_submission,
    discarded_on_failure,
    inspect_image,
    upload_spec,
)

log = logging.getLogger(__name__)
MiB = 1 << 20
MAX_PARTS = 10_000  # S3's most parts in one object
MAX_OPEN_UPLOADS = 3  # per submitter: each may hold up to the image limit on disk
UPLOAD_TTL = timedelta(hours=24)  # an upload no part has reached for this long is dropped
# A submission in progress holds its upload by a lease it renews while it joins and
# inspects; a lease past its time means the request died (a crash, a kill), and the upload
# is then put where its owner can go on: receiving (not joined), interrupted (joined) or
# submitted (the submission was made).
FINISH_LEASE = timedelta(minutes=2)
LEASE_RENEW_S = 20.0  # real seconds between renewals (a sixth of the lease)
SWEEP_BATCH = 20
SPOOL_IN_MEMORY = MiB  # a part's first MiB is held in memory, the rest in a temporary file


@dataclass(frozen=True)
class UploadStatus:
    """Where an upload stands: which parts arrived, and what it became."""

    record: UploadRecord
    received: tuple[int, ...]  # part numbers stored, ascending
    received_bytes: int

    @property
    def parts(self) -> int:
        return part_count(self.record.size, self.record.part_bytes)

    @property
    def missing(self) -> tuple[int, ...]:
        have = set(self.received)
        return tuple(n for n in range(1, self.parts + 1) if n not in have)


@dataclass(frozen=True)
class ReceivedPart:
    number: int
    size: int
    sha256: str  # hex


def upload_blob_key(upload_id: str) -> str:
    """Where an upload's image lies once joined (and, submitted, its model's blob)."""
    return f"uploads/{upload_id}.tar"


def part_count(size: int, part_bytes: int) -> int:
    return max(1, -(-size // part_bytes))


def part_size(record: UploadRecord, number: int) -> int:
    """How many bytes part ``number`` holds (the last one the rest)."""
    last = part_count(record.size, record.part_bytes)
    return record.part_bytes if number < last else record.size - (last - 1) * record.part_bytes


def start_upload(
    service: Service, task: TaskSpec, who: Principal, size: int, filename: str
) -> UploadStatus:
    """Begin an upload of ``size`` bytes to ``task``; refused when over the task's image
    limit or when the submitter has ``MAX_OPEN_UPLOADS`` unfinished ones."""
    limit = task.limits.max_image_bytes
    if size > limit:
        raise Refused("too_large", "image_too_large", f"the image exceeds {limit} bytes")
    if size <= 0:
        raise Refused("invalid", "invalid_upload", "size: an image has at least one byte")
    part_bytes = max(service.upload_part_bytes, service.blobs.min_part_bytes, -(-size // MAX_PARTS))
    sweep_expired(service)
    # counted and added under one lock: concurrent starts cannot all pass the count
    with named_lock(service.db, f"uploads:{who.user_id}"):
        return _started(service, task, who, size, filename, part_bytes)


def open_uploads(service: Service, who: Principal) -> list[UploadStatus]:
    """The caller's unfinished uploads, oldest first (to resume or drop one)."""
    found = Uploads(service.db).open_of(who.user_id, service.clock.now())
    statuses = []
    for record in found:
        with contextlib.suppress(Refused):  # submitted or dropped while we listed
            statuses.append(upload_status(service, who, record.id))
    return statuses


def _started(
    service: Service, task: TaskSpec, who: Principal, size: int, filename: str, part_bytes: int
) -> UploadStatus:
    uploads, now = Uploads(service.db), service.clock.now()
    unfinished = uploads.open_of(who.user_id, now)
    if len(unfinished) >= MAX_OPEN_UPLOADS:
        raise Refused(
            "too_many",
            "too_many_uploads",
            f"you have {len(unfinished)} unfinished uploads ("
            + ", ".join(record.id for record in unfinished)
            + "): resume, submit or delete one first (GET /uploads lists them)",
            details={"uploads": [record.id for record in unfinished]},
        )
    upload_id = str(uuid.uuid4())
    key = upload_blob_key(upload_id)
    handle = service.blobs.start_parts(key)
    record = UploadRecord(
        upload_id, task.name, who.user_id, filename, size, part_bytes, key, handle, now,
        now + UPLOAD_TTL,
    )  # fmt: skip
    try:
        uploads.add(record)
    except BaseException:  # no row, so nothing would ever sweep the parts
        service.blobs.abort_parts(key, handle)
        raise
    return UploadStatus(record, (), 0)


def upload_status(service: Service, who: Principal, upload_id: str) -> UploadStatus:
    """An upload of the caller's (404 for anyone else's), with the parts it holds."""
    return _status_of(service, _owned(service, who, upload_id))


def _status_of(service: Service, record: UploadRecord) -> UploadStatus:
    if record.state is not UploadState.RECEIVING:
        return UploadStatus(
            record, tuple(range(1, part_count(record.size, record.part_bytes) + 1)), record.size
        )
    parts = _stored(service, record)
    return UploadStatus(record, tuple(p.number for p in parts), sum(p.size for p in parts))


def receive_part(
    service: Service,
    who: Principal,
    upload_id: str,
    number: int,
    stream: IO[bytes],
    length: int | None,
    digests: Mapping[str, bytes] | None = None,
) -> ReceivedPart:
    """Store part ``number`` of ``length`` bytes read from ``stream``; with ``digests`` (the
    client's, by algorithm: ``sha-256``, ``sha-512``) a part that differs is refused and
    not stored."""
    record = _receiving(service, who, upload_id)
    parts = part_count(record.size, record.part_bytes)
    if not 1 <= number <= parts:
        raise Refused("invalid", "invalid_part", f"part numbers of this upload are 1..{parts}")
    expected = part_size(record, number)
    if length is not None and length != expected:
        raise Refused(
            "invalid", "invalid_part", f"part {number} holds {expected} bytes, not {length}"
        )
    with tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY) as spool:
        hashes = _spool(stream, spool, expected, number, digests or {})
        for name, sent in (digests or {}).items():
            if hashes[name].digest() != sent:
                raise Refused(
                    "invalid",
                    "part_digest_mismatch",
                    f"part {number} arrived with {name} {_b64(hashes[name].digest())}, not "
                    f"the {_b64(sent)} sent: it was not stored, send it again",
                )
        digest = hashes["sha-256"]
        spool.seek(0)
        offset = (number - 1) * record.part_bytes
        try:
            service.blobs.put_part(
                record.blob_key, record.handle, number, offset, cast(BinaryIO, spool), expected
            )
        except PartsNotFound:
            raise _unknown(upload_id) from None
    Uploads(service.db).touch(upload_id, service.clock.now() + UPLOAD_TTL)
    return ReceivedPart(number, expected, digest.hexdigest())


def abandon_upload(service: Service, who: Principal, upload_id: str) -> UploadStatus:
    """Drop an unfinished upload of the caller's with its parts (and, interrupted, its
    joined image); it as it was."""
    record = _unsubmitted(service, who, upload_id)
    status = _status_of(service, record)
    uploads = Uploads(service.db)
    if not uploads.move(upload_id, record.state, UploadState.FINISHING):
        raise _busy(upload_id)  # a submission took it meanwhile
    if record.state is UploadState.INTERRUPTED:
        _drop_joined(service, record)
    else:
        _drop(service, record)
    return status


def submit_uploaded(
    service: Service,
    task: TaskSpec,
    who: Principal,
    name: str,
    upload_id: str,
    *,
    protocol: str = DEFAULT_DIALECT,
    admit: Admission,
    idempotency_key: str | None = None,
    published: bool = False,
    requirements: Requirements | None = None,
) -> Submitted:
    """Join a complete upload's parts, inspect the tarball from the blob store and submit
    it. Whatever refuses it once its parts are joined (the tarball, the quota) drops the
    upload: the route checks the quota before, so only a race loses the bytes."""
    record = _unsubmitted(service, who, upload_id)
    if record.task != task.name:
        raise Refused(
            "invalid", "invalid_upload", f"upload {upload_id} is for task {record.task!r}"
        )
    status = _status_of(service, record)
    if status.missing:
        raise Refused(
            "conflict",
            "upload_incomplete",
            f"upload {upload_id} lacks parts {_ranges(status.missing)} of {status.parts}",
            details={"missing": list(status.missing)},
        )
    uploads = Uploads(service.db)
    lease = service.clock.now() + FINISH_LEASE
    if not uploads.move(upload_id, record.state, UploadState.FINISHING, expires_at=lease):
        raise _busy(upload_id)
    with _lease_kept(service, upload_id):
        if record.state is UploadState.RECEIVING:  # an interrupted one was joined before
            try:
                service.blobs.finish_parts(record.blob_key, record.handle, status.parts)
            except BaseException:
                uploads.move(upload_id, UploadState.FINISHING, UploadState.RECEIVING)
                raise
        with discarded_on_failure(service.blobs, record.blob_key):
            try:
                image_id = inspect_image(service.blobs.local_path(record.blob_key), task.limits)
                spec = upload_spec(record.blob_key, image_id, record.filename, protocol)
                submitted = create_submission(
                    service, task, name, spec, who.user_id, admit, idempotency_key,
                    published=published, requirements=requirements,
                )  # fmt: skip
            except BaseException:
                uploads.remove(upload_id)  # its bytes are gone with the refused blob
                raise
    kept = service.clock.now() + UPLOAD_TTL
    uploads.settle_submitted(upload_id, submitted.model_id, kept)
    return submitted


@contextlib.contextmanager
def _lease_kept(service: Service, upload_id: str) -> Iterator[None]:
    """Renew the lease on an upload being submitted every ``LEASE_RENEW_S`` while the
    block runs: joining and inspecting gigabytes may take minutes, a dead request none."""
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(LEASE_RENEW_S):
            try:
                Uploads(service.db).renew(upload_id, service.clock.now() + FINISH_LEASE)
            except Exception:  # an outage: the next renewal may pass; the lease is long
                log.warning("renewing the lease on upload %s failed", upload_id, exc_info=True)

    keeper = threading.Thread(target=renew, name=f"upload-lease-{upload_id[:8]}", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        stop.set()
        keeper.join()


def sweep_expired(service: Service) -> int:
    """Drop receiving uploads no part reached for ``UPLOAD_TTL`` with their parts, and
    interrupted ones nobody submitted again with their joined image; forget submitted ones
    then; put uploads whose submitting request died where their owner can go on. A failure
    is logged and costs the caller nothing."""
    uploads, now = Uploads(service.db), service.clock.now()
    swept = 0
    for record in uploads.expired(now, SWEEP_BATCH):
        try:
            swept += _sweep(service, uploads, record, now)
        except Exception:  # a store hiccup must not refuse someone's new upload
            log.warning("sweeping upload %s failed", record.id, exc_info=True)
    return swept


def _sweep(service: Service, uploads: Uploads, record: UploadRecord, now: datetime) -> int:
    if record.state is UploadState.SUBMITTED:
        uploads.remove(record.id)  # the image is its submission's
        return 1
    if record.state is UploadState.FINISHING:
        return int(_recovered(service, record) is not record)
    if not uploads.claim_expired(record.id, record.state, now):
        return 0  # a part arrived, or a submission took it, meanwhile
    if record.state is UploadState.INTERRUPTED:
        _drop_joined(service, record)
    else:
        _drop(service, record)
    return 1


def _recovered(service: Service, record: UploadRecord) -> UploadRecord:
    """``record`` as it stands once a dead submitting request is accounted for: an upload
    whose lease lapsed becomes submitted (the submission was made), interrupted (its parts
    were joined) or receiving again (they were not). Any other record is returned as is."""
    now = service.clock.now()
    if record.state is not UploadState.FINISHING or record.expires_at > now:
        return record
    uploads = Uploads(service.db)
    model_id = uploads.submission_holding(record)
    kept = now + UPLOAD_TTL
    if model_id is not None:
        to = UploadState.SUBMITTED
    elif service.blobs.exists(record.blob_key):
        to = UploadState.INTERRUPTED
    else:
        to = UploadState.RECEIVING
    if uploads.take_lapsed(record.id, now, to, kept, model_id):
        log.warning("upload %s: its submission was interrupted; now %s", record.id, to.value)
        if to is UploadState.INTERRUPTED:
            service.blobs.abort_parts(record.blob_key, record.handle)  # what a join left
    found = uploads.get(record.id)
    if found is None:
        raise _unknown(record.id)
    return found


def _drop(service: Service, record: UploadRecord) -> None:
    """A receiving upload's parts and row (its image was never joined)."""
    service.blobs.abort_parts(record.blob_key, record.handle)
    Uploads(service.db).remove(record.id)


def _drop_joined(service: Service, record: UploadRecord) -> None:
    """An interrupted upload's joined image and row, unless a submission holds the image
    (one made by a request thought dead: the row then says so)."""
    uploads = Uploads(service.db)
    model_id = uploads.submission_holding(record)
    if model_id is not None:
        uploads.settle_submitted(record.id, model_id, service.clock.now() + UPLOAD_TTL)
        return
    service.blobs.delete(record.blob_key)
    service.blobs.abort_parts(record.blob_key, record.handle)
    uploads.remove(record.id)


def receiving_upload(service: Service, who: Principal, upload_id: str) -> UploadRecord:
    """An upload of the caller's that takes parts (404 for anyone else's, 409 once it is
    being submitted or was): what an adapter checks before it reads a part's headers."""
    return _receiving(service, who, upload_id)


def _owned(service: Service, who: Principal, upload_id: str) -> UploadRecord:
    record = Uploads(service.db).get(upload_id)
    if record is None or record.owner_id != who.user_id:
        raise _unknown(upload_id)  # another's upload is not there for the caller
    return _recovered(service, record)


def _unsubmitted(service: Service, who: Principal, upload_id: str) -> UploadRecord:
    """An upload of the caller's that may still be submitted or dropped: receiving, or
    interrupted (409 while being submitted, or once it was)."""
    record = _owned(service, who, upload_id)
    if record.state is UploadState.SUBMITTED:
        raise Refused(
            "conflict",
            "upload_submitted",
            f"upload {upload_id} was submitted as {record.model_id}",
            details={"submission": record.model_id},
        )
    if record.state is UploadState.FINISHING:
        raise _busy(upload_id, record.expires_at)
    return record


def _receiving(service: Service, who: Principal, upload_id: str) -> UploadRecord:
    record = _unsubmitted(service, who, upload_id)
    if record.state is UploadState.INTERRUPTED:
        raise Refused(
            "conflict",
            "upload_interrupted",
            f"upload {upload_id}'s parts were joined before its submission was interrupted: "
            "submit it again as it is, or delete it",
        )
    return record


def _stored(service: Service, record: UploadRecord) -> list[ReceivedPart]:
    try:
        parts = service.blobs.stored_parts(record.blob_key, record.handle)
    except PartsNotFound:  # the store dropped them (an S3 lifecycle rule): none are left
        return []
    return [
        ReceivedPart(p.number, p.size, "") for p in parts if p.size == part_size(record, p.number)
    ]


def _spool(
    stream: IO[bytes], spool: IO[bytes], size: int, number: int, digests: Mapping[str, bytes]
) -> dict[str, hashlib._Hash]:
    """Copy exactly ``size`` bytes into ``spool``, hashing them with SHA-256 and whatever
    else ``digests`` names (too few or too many bytes: refused)."""
    hashes = {"sha-256": hashlib.sha256()}
    if "sha-512" in digests:
        hashes["sha-512"] = hashlib.sha512()
    left = size
    while left > 0 and (chunk := stream.read(min(left, MiB))):
        for digest in hashes.values():
            digest.update(chunk)
        spool.write(chunk)
        left -= len(chunk)
    if left or stream.read(1):
        raise Refused("invalid", "invalid_part", f"part {number} must hold exactly {size} bytes")
    return hashes


def _ranges(numbers: tuple[int, ...]) -> str:
    """``(1, 2, 3, 7)`` → ``"1-3, 7"`` (at most ten runs named)."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and runs[-1][1] == n - 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    named = [f"{a}-{b}" if a != b else str(a) for a, b in runs[:10]]
    return ", ".join(named) + (", …" if len(runs) > 10 else "")


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _unknown(upload_id: str) -> Refused:
    return Refused("not_found", "unknown_upload", f"no upload {upload_id!r}")


def _busy(upload_id: str, lease_ends: datetime | None = None) -> Refused:
    then = (
        f" (if that request died, it can be submitted again after {lease_ends.isoformat()}Z)"
        if lease_ends is not None
        else ""
    )
    return Refused("conflict", "upload_busy", f"upload {upload_id} is being submitted{then}")
