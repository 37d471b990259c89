"""Submitting a model: the runtime spec checked, an uploaded image stored and inspected, the
model row and its job created. Shared by the API routes and the CLI's local submissions.

A refusal is a :class:`SubmissionRefused` (code and sentence, no HTTP status); whatever
fails, nothing is left half-stored: an upload's blob goes with the failed submission.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, cast

from api.service import Service
from configs.schema import Limits, TaskSpec
from evaluator.errors import EvaluationError
from evaluator.runtimes.docker.references import check_registry_reference
from evaluator.runtimes.docker.tarballs import inspect_tarball
from evaluator.runtimes.specs import DockerSource, DockerSpec, RuntimeSpec, parse_runtime_spec
from evaluator.transport.dialects import DEFAULT_DIALECT
from store.blobs import BlobStore

INVALID = "invalid_submission"


class SubmissionRefused(Exception):
    """A submission refused with a machine-readable code and a sentence; nothing was kept."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


class UploadTooLarge(SubmissionRefused):
    """The uploaded bytes themselves went over the task's image limit."""

    def __init__(self, limit: int) -> None:
        super().__init__("image_too_large", f"the image exceeds {limit} bytes")


@dataclass(frozen=True)
class Submitted:
    """A queued submission: its model row, its job, its name and the runtime spec stored."""

    model_id: str
    job_id: str
    name: str
    spec: RuntimeSpec


def submit_runtime(
    service: Service, task: TaskSpec, name: str, runtime: Mapping[str, Any]
) -> Submitted:
    """Submit a runtime object as a client sent it. A docker runtime names a registry image
    (never a server file or local image); other kinds are taken as given, so the caller
    decides whether they are allowed."""
    if runtime.get("kind") != "docker":
        return _create(service, task, name, _parsed(runtime))
    if not runtime.get("image"):
        raise SubmissionRefused(INVALID, "a docker runtime needs 'image' (a registry reference)")
    protocol = runtime.get("protocol", DEFAULT_DIALECT)
    return submit_reference(service, task, name, runtime["image"], protocol)


def submit_reference(
    service: Service, task: TaskSpec, name: str, reference: str, protocol: str = DEFAULT_DIALECT
) -> Submitted:
    """Submit a registry image the worker will pull."""
    try:
        image = check_registry_reference(reference)
        spec = DockerSpec(source=DockerSource.REGISTRY, image=image, protocol=protocol)
    except ValueError as exc:
        raise SubmissionRefused(INVALID, str(exc)) from None
    return _create(service, task, name, spec)


def submit_upload(
    service: Service,
    task: TaskSpec,
    name: str,
    stream: IO[bytes],
    *,
    filename: str | None = None,
    protocol: str = DEFAULT_DIALECT,
) -> Submitted:
    """Submit a `docker save` tarball read from ``stream``: streamed to the blob store under
    the task's image limit, inspected there, then queued."""
    key = _store(service.blobs, stream, task.limits.max_image_bytes)
    with _discarded_on_failure(service.blobs, key):
        # refuse a corrupt or multi-image tarball now, not minutes later in a worker
        image_id = _inspect(service.blobs.local_path(key), task.limits)
        spec = _upload_spec(key, image_id, filename or "upload", protocol)
        return _create(service, task, name, spec)


def submit_file(
    service: Service, task: TaskSpec, name: str, path: Path, protocol: str = DEFAULT_DIALECT
) -> Submitted:
    """Submit a `docker save` tarball on this machine (trusted local use): inspected where
    it lies, then copied into the blob store under a fresh key (never the file's name)."""
    image_id = _inspect(path, task.limits)  # a broken file is refused before it is copied
    with path.open("rb") as handle:
        key = _store(service.blobs, handle, task.limits.max_image_bytes)
    with _discarded_on_failure(service.blobs, key):
        return _create(service, task, name, _upload_spec(key, image_id, path.name, protocol))


def _parsed(runtime: Mapping[str, Any]) -> RuntimeSpec:
    try:
        return parse_runtime_spec(runtime)
    except ValueError as exc:
        raise SubmissionRefused(INVALID, str(exc)) from None


def _upload_spec(key: str, image_id: str, image: str, protocol: str) -> DockerSpec:
    return DockerSpec(
        source=DockerSource.UPLOAD, blob=key, protocol=protocol, image_id=image_id, image=image
    )


def _create(service: Service, task: TaskSpec, name: str, spec: RuntimeSpec) -> Submitted:
    """The model row and its job, in one transaction."""
    image_id = spec.image_id if isinstance(spec, DockerSpec) else None
    model_id, job_id = service.store.submit(task.name, name, spec.to_dict(), image_id=image_id)
    return Submitted(model_id, job_id, name, spec)


def _store(blobs: BlobStore, stream: IO[bytes], limit: int) -> str:
    """Stream an image into a fresh ``uploads/`` key; refuses an empty or oversized one."""
    key = f"uploads/{uuid.uuid4()}.tar"
    with _discarded_on_failure(blobs, key):
        capped = cast(BinaryIO, _Capped(stream, limit))  # put_file only calls read()
        if blobs.put_file(key, capped) == 0:
            raise SubmissionRefused(INVALID, "the uploaded image file is empty")
    return key


def _inspect(path: Path, limits: Limits) -> str:
    """The image ID of a tarball that holds exactly one loadable image within the limits."""
    try:
        image_id, _ = inspect_tarball(path, limits)
    except EvaluationError as exc:
        raise SubmissionRefused(exc.code.value, exc.message) from None
    return image_id


@contextmanager
def _discarded_on_failure(blobs: BlobStore, key: str) -> Iterator[None]:
    """Delete ``key`` when the block fails in any way (a refusal, a database error, an
    interrupt): a blob is kept only with the submission that owns it."""
    try:
        yield
    except BaseException:
        blobs.delete(key)
        raise


class _Capped:
    """Reads a stream but refuses more than ``limit`` bytes, so an upload is never held in
    memory and never stored whole when it is too large."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self.stream, self.limit, self.read_so_far = stream, limit, 0

    def read(self, size: int = -1) -> bytes:
        chunk = self.stream.read(size)
        self.read_so_far += len(chunk)
        if self.read_so_far > self.limit:
            raise UploadTooLarge(self.limit)
        return chunk
