"""Submitting a model: the runtime spec checked, an uploaded image stored and inspected, the
model row and its job created. Shared by the API routes and the CLI's local submissions.

A refusal is a :class:`SubmissionRefused` (code and sentence, no HTTP status); whatever
fails, nothing is left half-stored: an upload's blob goes with the failed submission.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, cast
from urllib.parse import urlsplit

from configs.schema import Limits, TaskSpec
from configs.vocabulary.capabilities import Requirements
from evaluator.errors import EvaluationError
from evaluator.runtimes.docker.references import (
    check_registry_address,
    check_registry_reference,
    parse_ip_host,
)
from evaluator.runtimes.docker.tarballs import inspect_tarball
from evaluator.runtimes.specs import (
    DockerSource,
    DockerSpec,
    RuntimeSpec,
    UrlSpec,
    parse_runtime_spec,
)
from evaluator.transport.dialects import DEFAULT_DIALECT
from store.blobs import BlobStore
from usecases.service import Service

INVALID = "invalid_submission"

Admission = Callable[[], AbstractContextManager[None]]
"""Held around the insert only (e.g. a quota re-check under a lock): it may raise to
refuse, and whatever it raises removes what the submission stored."""


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
    service: Service,
    task: TaskSpec,
    name: str,
    runtime: Mapping[str, Any],
    *,
    own_addresses: Collection[tuple[str, int]] = (),
    owner_id: str | None = None,
    admit: Admission = nullcontext,
    idempotency_key: str | None = None,
    published: bool = False,
    requirements: Requirements | None = None,
) -> Submitted:
    """Submit a runtime object as a client sent it. A docker runtime names a registry image
    (never a server file or local image, never a registry on the platform's network unless
    allow-listed); other kinds are taken as given, so the caller decides whether they are
    allowed, except a url runtime at one of ``own_addresses`` (the API server itself)."""
    if runtime.get("kind") != "docker":
        spec = _parsed(runtime)
        if isinstance(spec, UrlSpec):
            refuse_own_address(spec.url, own_addresses)
        return create_submission(
            service,
            task,
            name,
            spec,
            owner_id,
            admit,
            idempotency_key,
            published=published,
            requirements=requirements,
        )
    if not runtime.get("image"):
        raise SubmissionRefused(INVALID, "a docker runtime needs 'image' (a registry reference)")
    protocol = runtime.get("protocol", DEFAULT_DIALECT)
    return submit_reference(
        service,
        task,
        name,
        runtime["image"],
        protocol,
        owner_id=owner_id,
        admit=admit,
        idempotency_key=idempotency_key,
        published=published,
        requirements=requirements,
    )


def submit_reference(
    service: Service,
    task: TaskSpec,
    name: str,
    reference: str,
    protocol: str = DEFAULT_DIALECT,
    *,
    trusted: bool = False,
    owner_id: str | None = None,
    admit: Admission = nullcontext,
    idempotency_key: str | None = None,
    published: bool = False,
    requirements: Requirements | None = None,
) -> Submitted:
    """Submit a registry image the worker will pull. Unless ``trusted`` (the CLI writing to
    its own database), a registry on a local network must be in the operator's allow-list
    (``service.allowed_registries``); the check is by name and address, before any network
    use."""
    try:
        image = check_registry_reference(reference)
        if not trusted:
            check_registry_address(image, service.allowed_registries)
        spec = DockerSpec(source=DockerSource.REGISTRY, image=image, protocol=protocol)
    except ValueError as exc:
        raise SubmissionRefused(INVALID, str(exc)) from None
    return create_submission(
        service,
        task,
        name,
        spec,
        owner_id,
        admit,
        idempotency_key,
        published=published,
        requirements=requirements,
    )


def refuse_own_address(url: str, own_addresses: Collection[tuple[str, int]]) -> None:
    """Refuse a url runtime that would have the worker evaluate the API server itself: the
    same port as one of ``own_addresses`` (the server's socket and the Host the client
    used), on the same host name, or on loopback/unspecified when the server is on loopback
    or every interface (where loopback reaches it). Other loopback ports stay allowed: a
    model already running on this machine is what url runtimes are for."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower().rstrip(".")
        port = parts.port or {"https": 443}.get(parts.scheme, 80)
    except ValueError as exc:
        raise SubmissionRefused(INVALID, f"url {url!r} is not a valid URL ({exc})") from None
    for own_host, own_port in own_addresses:
        own_host = own_host.lower().strip("[]").rstrip(".")
        same_machine = _local_host(host) and _local_host(own_host)
        if port == own_port and (host == own_host or same_machine):
            raise SubmissionRefused(
                INVALID,
                f"url {url!r} is this API server, not a model: give the address of a running model",
            )


def server_addresses(
    environ: Mapping[str, Any], host_header: str, scheme: str
) -> list[tuple[str, int]]:
    """Where a server is reached: its socket (the WSGI ``SERVER_NAME``/``SERVER_PORT``) and
    the Host a client used."""
    found = []
    with suppress(KeyError, TypeError, ValueError):  # not a WSGI server that says
        found.append((str(environ["SERVER_NAME"]), int(environ["SERVER_PORT"])))
    try:
        parts = urlsplit(f"//{host_header}")
        if parts.hostname:
            found.append((parts.hostname, parts.port or (443 if scheme == "https" else 80)))
    except ValueError:
        pass  # a malformed Host names nothing
    return found


def _local_host(host: str) -> bool:
    """Loopback or unspecified (connecting to 0.0.0.0 or :: reaches this machine)."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    address = parse_ip_host(host)
    return address is not None and (address.is_loopback or address.is_unspecified)


def submit_upload(
    service: Service,
    task: TaskSpec,
    name: str,
    stream: IO[bytes],
    *,
    filename: str | None = None,
    protocol: str = DEFAULT_DIALECT,
    owner_id: str | None = None,
    admit: Admission = nullcontext,
    idempotency_key: str | None = None,
    published: bool = False,
    requirements: Requirements | None = None,
) -> Submitted:
    """Submit a `docker save` tarball read from ``stream``: streamed to the blob store under
    the task's image limit, inspected there, then queued."""
    key = _store(service.blobs, stream, task.limits.max_image_bytes)
    with discarded_on_failure(service.blobs, key):
        # refuse a corrupt or multi-image tarball now, not minutes later in a worker
        image_id = inspect_image(service.blobs.local_path(key), task.limits)
        spec = upload_spec(key, image_id, filename or "upload", protocol)
        return create_submission(
            service,
            task,
            name,
            spec,
            owner_id,
            admit,
            idempotency_key,
            published=published,
            requirements=requirements,
        )


def submit_file(
    service: Service,
    task: TaskSpec,
    name: str,
    path: Path,
    protocol: str = DEFAULT_DIALECT,
    *,
    owner_id: str | None = None,
    published: bool = False,
    requirements: Requirements | None = None,
) -> Submitted:
    """Submit a `docker save` tarball on this machine (trusted local use): inspected where
    it lies, then copied into the blob store under a fresh key (never the file's name)."""
    image_id = inspect_image(path, task.limits)  # a broken file is refused before it is copied
    with path.open("rb") as handle:
        key = _store(service.blobs, handle, task.limits.max_image_bytes)
    with discarded_on_failure(service.blobs, key):
        spec = upload_spec(key, image_id, path.name, protocol)
        return create_submission(
            service, task, name, spec, owner_id, published=published, requirements=requirements
        )


def _parsed(runtime: Mapping[str, Any]) -> RuntimeSpec:
    try:
        return parse_runtime_spec(runtime)
    except ValueError as exc:
        raise SubmissionRefused(INVALID, str(exc)) from None


def upload_spec(key: str, image_id: str, image: str, protocol: str) -> DockerSpec:
    return DockerSpec(
        source=DockerSource.UPLOAD, blob=key, protocol=protocol, image_id=image_id, image=image
    )


def create_submission(
    service: Service,
    task: TaskSpec,
    name: str,
    spec: RuntimeSpec,
    owner_id: str | None,
    admit: Admission = nullcontext,
    idempotency_key: str | None = None,
    published: bool = False,
    requirements: Requirements | None = None,
) -> Submitted:
    """The model row, its owner and its job, in one transaction, inside ``admit``
    (DuplicateSubmission when ``idempotency_key`` made one already: nothing is kept)."""
    image_id = spec.image_id if isinstance(spec, DockerSpec) else None
    with admit():
        model_id, job_id = service.store.submit(
            task.name,
            name,
            spec.to_dict(),
            image_id=image_id,
            owner_id=owner_id,
            idempotency_key=idempotency_key,
            published=published,
            requirements=requirements,
        )
    return Submitted(model_id, job_id, name, spec)


def _store(blobs: BlobStore, stream: IO[bytes], limit: int) -> str:
    """Stream an image into a fresh ``uploads/`` key; refuses an empty or oversized one."""
    key = f"uploads/{uuid.uuid4()}.tar"
    with discarded_on_failure(blobs, key):
        capped = cast(BinaryIO, _Capped(stream, limit))  # put_file only calls read()
        if blobs.put_file(key, capped) == 0:
            raise SubmissionRefused(INVALID, "the uploaded image file is empty")
    return key


def inspect_image(path: Path, limits: Limits) -> str:
    """The image ID of a tarball that holds exactly one loadable image within the limits."""
    try:
        image_id, _ = inspect_tarball(path, limits)
    except EvaluationError as exc:
        raise SubmissionRefused(exc.code.value, exc.message) from None
    return image_id


@contextmanager
def discarded_on_failure(blobs: BlobStore, key: str) -> Iterator[None]:
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
