"""Where model images come from: a ``docker save`` tarball, a registry, a local directory.

Every source ends in an :class:`ImageRef` pinned by image ID (and repo digest where there is
one), so a result names exactly what ran. Failures raise ``EvaluationError`` with
``IMAGE_TOO_LARGE`` or ``IMAGE_NOT_LOADABLE`` and a sentence a submitter can act on.
The ``acquire_*`` functions also say whether the job brought the image into the engine
(:class:`Acquired`), so the runtime can :func:`release` it after the run. A tarball is
checked before the engine sees it (``evaluator.runtimes.docker.tarballs``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

import docker
from docker.errors import APIError, BuildError, DockerException, ImageNotFound
from docker.utils import parse_repository_tag

from configs.schema import Limits
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.runtimes.docker.engine_faults import classify
from evaluator.runtimes.docker.references import (
    RegistryUnresolved,
    Resolver,
    check_pull_address,
    pull_allow_list,
    system_resolver,
)
from evaluator.runtimes.docker.tarballs import inspect_tarball, mib

_TARBALL_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2")


@dataclass(frozen=True)
class ImageRef:
    """A local image, pinned: ``image_id`` is ``sha256:…``; ``digest`` the repo digest if any."""

    image_id: str
    digest: str | None
    tags: tuple[str, ...]
    size_bytes: int
    user: str


@dataclass(frozen=True)
class Acquired:
    """An image a job obtained: ``fresh`` when it was not in the engine before, with the
    tags that acquisition created (``release`` removes exactly those, then the image)."""

    ref: ImageRef
    fresh: bool = False
    own_tags: tuple[str, ...] = ()


def _client(client: docker.DockerClient | None) -> docker.DockerClient:
    return client or docker.from_env()


def image_ref(image: str, client: docker.DockerClient | None = None) -> ImageRef:
    """The local image ``image`` (ID or tag) as an ImageRef; IMAGE_NOT_LOADABLE if absent."""
    try:
        obj = _client(client).images.get(image)
    except ImageNotFound:
        raise EvaluationError(
            FailureCode.IMAGE_NOT_LOADABLE, f"image {image!r} is not present on this worker"
        ) from None
    attrs = obj.attrs
    digests = attrs.get("RepoDigests") or []
    return ImageRef(
        image_id=attrs["Id"],
        digest=digests[0] if digests else None,
        tags=tuple(attrs.get("RepoTags") or ()),
        size_bytes=int(attrs.get("Size") or 0),
        user=str((attrs.get("Config") or {}).get("User") or ""),
    )


def check_size(
    ref: ImageRef,
    limits: Limits,
    client: docker.DockerClient | None = None,
    *,
    remove: bool = False,
) -> None:
    """IMAGE_TOO_LARGE when the unpacked size exceeds the limit (``remove``: delete it too)."""
    if ref.size_bytes <= limits.max_image_bytes:
        return
    if remove:
        with contextlib.suppress(DockerException):
            _client(client).images.remove(ref.image_id, force=True)
    raise EvaluationError(
        FailureCode.IMAGE_TOO_LARGE,
        f"the image unpacks to {mib(ref.size_bytes)}, over the limit of "
        f"{mib(limits.max_image_bytes)}",
    )


def load_tarball(
    path: str | os.PathLike[str], limits: Limits, client: docker.DockerClient | None = None
) -> ImageRef:
    """Load a single-image ``docker save`` tarball (plain or compressed), pinned by image ID."""
    return acquire_tarball(path, limits, client).ref


def acquire_tarball(
    path: str | os.PathLike[str], limits: Limits, client: docker.DockerClient | None = None
) -> Acquired:
    """Load a tarball; ``fresh`` when its image was not in the engine before.

    Tags inside the tarball are not trusted: any local tag the load moved is put back, so an
    upload named ``dynaeval/python-base:latest`` cannot replace the platform's images. The
    tags left on a fresh image were all created by this load (its ``own_tags``).
    """
    client = _client(client)
    _, tags = inspect_tarball(path, limits)  # refused here before the engine sees it
    # fresh is judged by what was loaded, not by the ID the tarball claims: an image that
    # is not the one claimed must still be removed after its run
    before = _image_ids(client)
    previous: dict[str, str] = {}
    for tag in tags:
        with contextlib.suppress(ImageNotFound, APIError):
            previous[tag] = client.images.get(tag).id
    try:
        with open(path, "rb") as handle:
            loaded = client.images.load(handle)
    except (APIError, DockerException) as exc:
        raise EvaluationError(
            FailureCode.IMAGE_NOT_LOADABLE, f"the engine could not load the tarball: {exc}"
        ) from None
    finally:
        _restore_tags(client, previous)
    if len(loaded) != 1:
        raise EvaluationError(
            FailureCode.IMAGE_NOT_LOADABLE, f"loading gave {len(loaded)} images, expected one"
        )
    ref = image_ref(loaded[0].id, client)
    fresh = ref.image_id not in before
    check_size(ref, limits, client, remove=fresh)
    return Acquired(ref, fresh=fresh, own_tags=ref.tags if fresh else ())


def _present(client: docker.DockerClient, image: str) -> bool:
    try:
        client.images.get(image)
    except (ImageNotFound, APIError):
        return False
    return True


def _restore_tags(client: docker.DockerClient, previous: dict[str, str]) -> None:
    for tag, image_id in previous.items():
        repository, name_tag = parse_repository_tag(tag)
        with contextlib.suppress(APIError, ImageNotFound):
            client.api.tag(image_id, repository, name_tag or "latest", force=True)


def _image_ids(client: docker.DockerClient) -> set[str]:
    return set(client.api.images(quiet=True, all=True))


def pull(reference: str, limits: Limits, client: docker.DockerClient | None = None) -> ImageRef:
    """Pull one image (``registry/name:tag`` or ``…@sha256:…``); never all tags of a repo."""
    return acquire_pull(reference, limits, client).ref


def acquire_pull(
    reference: str,
    limits: Limits,
    client: docker.DockerClient | None = None,
    *,
    allowed: Collection[str] | None = None,
    resolve: Resolver = system_resolver,
    check_address: bool = True,
) -> Acquired:
    """Ask the registry for ``reference``'s digest, then pull exactly that digest.

    Pulling by digest creates no local tag, so a reference named like a local image (the
    base image, an example) cannot move that tag; the registry is always asked, whatever
    the engine holds. ``fresh`` when the image was not in the engine before.

    First, unless ``check_address`` is off (trusted local use), the registry's host is
    resolved again and refused when it is on the platform's own network and not in
    ``allowed`` (default: ``DYNAEVAL_ALLOWED_REGISTRIES`` and this process's additions,
    see ``references.allow_registries_for_pulls``): the engine is never asked.
    """
    if check_address:
        check_pull_registry(reference, allowed, resolve)
    client = _client(client)
    repository, tag = parse_repository_tag(reference)
    try:
        if tag and tag.startswith("sha256:"):
            digest = tag
        else:
            digest = client.images.get_registry_data(reference).id
        before = _image_ids(client)
        image = client.images.pull(repository, tag=digest)
    except (APIError, DockerException) as exc:
        raise classify(exc, FailureCode.IMAGE_NOT_LOADABLE, f"pulling {reference!r}") from None
    ref = image_ref(image.id, client)
    fresh = ref.image_id not in before
    check_size(ref, limits, client, remove=fresh)
    return Acquired(ref, fresh=fresh)


def check_pull_registry(
    reference: str, allowed: Collection[str] | None = None, resolve: Resolver = system_resolver
) -> None:
    """The pull-time registry check as the job's failure: the submitter named a registry
    the worker may not reach (``image_not_loadable``); a resolver that says "try again" is
    the platform's fault (retried)."""
    allowed = pull_allow_list() if allowed is None else allowed
    try:
        check_pull_address(reference, allowed, resolve)
    except RegistryUnresolved as exc:
        code = FailureCode.PLATFORM_ERROR if exc.temporary else FailureCode.IMAGE_NOT_LOADABLE
        raise EvaluationError(code, f"not pulled: {exc}") from None
    except ValueError as exc:
        raise EvaluationError(FailureCode.IMAGE_NOT_LOADABLE, f"refused to pull: {exc}") from None


def release(
    image_id: str, own_tags: Iterable[str] = (), client: docker.DockerClient | None = None
) -> bool:
    """Remove an image a job brought in: its ``own_tags``, then the image itself, unless
    another tag now points at it or a container uses it. True when it is gone."""
    client = _client(client)
    try:
        tags = set(client.api.inspect_image(image_id).get("RepoTags") or ())
    except ImageNotFound:
        return True
    except (APIError, DockerException):
        return False
    if tags - set(own_tags):
        return False
    with contextlib.suppress(APIError, DockerException):
        for tag in sorted(tags):  # removing the last tag removes the image when unused
            client.api.remove_image(tag)
        if _present(client, image_id):
            client.api.remove_image(image_id)  # never forced: a container using it keeps it
    return not _present(client, image_id)


def build_directory(
    path: str | os.PathLike[str],
    client: docker.DockerClient | None = None,
    *,
    tag: str | None = None,
) -> ImageRef:
    """Build a local directory holding a Dockerfile (trusted local use; RUN has no network)."""
    path = Path(path)
    if not (path / "Dockerfile").is_file():
        raise EvaluationError(FailureCode.IMAGE_NOT_LOADABLE, f"no Dockerfile in {path}")
    try:
        image, _ = _client(client).images.build(
            path=str(path), tag=tag, rm=True, forcerm=True, pull=False, network_mode="none"
        )
    except BuildError as exc:
        lines = "".join(str(item.get("stream", "")) for item in exc.build_log)[-2000:]
        raise EvaluationError(
            FailureCode.IMAGE_NOT_LOADABLE, f"docker build failed: {exc.msg}", lines
        ) from None
    except (APIError, DockerException) as exc:
        raise EvaluationError(
            FailureCode.IMAGE_NOT_LOADABLE, f"docker build failed: {exc}"
        ) from None
    return image_ref(image.id, client)


def resolve_source(
    source: str, limits: Limits | None = None, client: docker.DockerClient | None = None
) -> ImageRef:
    """A tarball file, a directory with a Dockerfile, or a local image / registry reference."""
    return acquire_local(source, limits, client).ref


def acquire_local(
    source: str, limits: Limits | None = None, client: docker.DockerClient | None = None
) -> Acquired:
    """Trusted local use only (CLI ``evaluate``, example models): ``source`` may name any
    server file, directory or local image. Tarballs and pulls report ``fresh``."""
    limits = limits or Limits()
    client = _client(client)
    path = Path(source)
    if path.is_file() and source.endswith(_TARBALL_SUFFIXES):
        return acquire_tarball(path, limits, client)
    if path.is_dir() and (path / "Dockerfile").is_file():
        ref = build_directory(path, client)
        check_size(ref, limits, client)
        return Acquired(ref)
    try:
        ref = image_ref(source, client)
    except EvaluationError:
        return acquire_pull(source, limits, client, check_address=False)
    check_size(ref, limits, client)
    return Acquired(ref)
