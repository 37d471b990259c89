"""Where model images come from: a ``docker save`` tarball, a registry, a local directory.

Every source ends in an :class:`ImageRef` pinned by image ID (and repo digest where there is
one), so a result names exactly what ran. Failures raise ``EvaluationError`` with
``IMAGE_TOO_LARGE`` or ``IMAGE_NOT_LOADABLE`` and a sentence a submitter can act on.
"""

from __future__ import annotations

import contextlib
import json
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

import docker
from docker.errors import APIError, BuildError, DockerException, ImageNotFound
from docker.utils import parse_repository_tag

from evaluator.errors import EvaluationError, FailureCode
from evaluator.runtime import Limits

_TARBALL_SUFFIXES = (".tar", ".tar.gz", ".tgz")


@dataclass(frozen=True)
class ImageRef:
    """A local image, pinned: ``image_id`` is ``sha256:…``; ``digest`` the repo digest if any."""

    image_id: str
    digest: str | None
    tags: tuple[str, ...]
    size_bytes: int
    user: str


def _client(client: docker.DockerClient | None) -> docker.DockerClient:
    return client or docker.from_env()


def _mib(n: int) -> str:
    return f"{n / 1024**2:.1f} MiB"


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
        f"the image unpacks to {_mib(ref.size_bytes)}, over the limit of "
        f"{_mib(limits.max_image_bytes)}",
    )


def inspect_tarball(path: str | os.PathLike[str], limits: Limits) -> tuple[str, list[str]]:
    """Check a ``docker save`` tarball without loading it: (image ID, tags it carries).

    Size over the limit → IMAGE_TOO_LARGE; not a tar, no manifest.json, more than one image,
    or missing members → IMAGE_NOT_LOADABLE.
    """
    path = Path(path)
    size = path.stat().st_size
    if size > limits.max_image_bytes:
        raise EvaluationError(
            FailureCode.IMAGE_TOO_LARGE,
            f"the image tarball is {_mib(size)}, over the limit of {_mib(limits.max_image_bytes)}",
        )
    not_loadable = FailureCode.IMAGE_NOT_LOADABLE
    try:
        with tarfile.open(path, "r:*") as tar:
            members = {m.name.lstrip("./"): m for m in tar.getmembers()}
            if "manifest.json" not in members:
                raise EvaluationError(
                    not_loadable, "the tarball has no manifest.json: make it with `docker save`"
                )
            handle = tar.extractfile(members["manifest.json"])
            manifest = json.loads(handle.read(1 << 20)) if handle else None
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise EvaluationError(
            not_loadable, f"the image tarball is corrupt or not a tar archive ({exc})"
        ) from None
    if not isinstance(manifest, list) or not manifest:
        raise EvaluationError(not_loadable, "the tarball's manifest.json lists no image")
    if len(manifest) > 1:
        raise EvaluationError(
            not_loadable,
            f"the tarball holds {len(manifest)} images; upload exactly one "
            "(`docker save <one image>`)",
        )
    entry = manifest[0]
    if not isinstance(entry, dict):
        raise EvaluationError(not_loadable, "the tarball's manifest.json entry is not an object")
    wanted = [entry.get("Config"), *(entry.get("Layers") or [])]
    missing = [name for name in wanted if not isinstance(name, str) or name not in members]
    if missing or not entry.get("Layers"):
        raise EvaluationError(
            not_loadable, f"the tarball is incomplete: missing {missing[:3] or 'layers'}"
        )
    image_id = "sha256:" + Path(entry["Config"]).name.removesuffix(".json")
    return image_id, [tag for tag in entry.get("RepoTags") or [] if isinstance(tag, str)]


def load_tarball(
    path: str | os.PathLike[str], limits: Limits, client: docker.DockerClient | None = None
) -> ImageRef:
    """Load a single-image ``docker save`` tarball (plain or gzip) and pin it by image ID.

    Tags inside the tarball are not trusted: any local tag the load moved is put back, so an
    upload named ``dynaeval/python-base:latest`` cannot replace the platform's images.
    """
    client = _client(client)
    image_id, tags = inspect_tarball(path, limits)
    existed = _present(client, image_id)
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
    check_size(ref, limits, client, remove=not existed)
    return ref


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


def pull(reference: str, limits: Limits, client: docker.DockerClient | None = None) -> ImageRef:
    """Pull one image (``registry/name:tag`` or ``…@sha256:…``); never all tags of a repo."""
    client = _client(client)
    repository, tag = parse_repository_tag(reference)
    if not tag:
        tag = "latest"
    existed = _present(client, reference)
    try:
        image = client.images.pull(repository, tag=tag)
    except (APIError, DockerException) as exc:
        raise EvaluationError(
            FailureCode.IMAGE_NOT_LOADABLE, f"could not pull {reference!r}: {exc}"
        ) from None
    ref = image_ref(image.id, client)
    check_size(ref, limits, client, remove=not existed and not _shared(client, ref, reference))
    return ref


def _shared(client: docker.DockerClient, ref: ImageRef, reference: str) -> bool:
    """Whether the image also carries tags other than ``reference`` (then keep it)."""
    name = reference if ":" in reference.rsplit("/", 1)[-1] else f"{reference}:latest"
    return any(tag != name for tag in ref.tags)


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
    limits = limits or Limits()
    client = _client(client)
    path = Path(source)
    if path.is_file() and source.endswith(_TARBALL_SUFFIXES):
        return load_tarball(path, limits, client)
    if path.is_dir() and (path / "Dockerfile").is_file():
        ref = build_directory(path, client)
        check_size(ref, limits, client)
        return ref
    try:
        ref = image_ref(source, client)
    except EvaluationError:
        return pull(source, limits, client)
    check_size(ref, limits, client)
    return ref
