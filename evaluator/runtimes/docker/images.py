"""Where model images come from: a ``docker save`` tarball, a registry, a local directory.

Every source ends in an :class:`ImageRef` pinned by image ID (and repo digest where there is
one), so a result names exactly what ran. Failures raise ``EvaluationError`` with
``IMAGE_TOO_LARGE`` or ``IMAGE_NOT_LOADABLE`` and a sentence a submitter can act on.
The ``acquire_*`` functions also say whether the job brought the image into the engine
(:class:`Acquired`), so the runtime can :func:`release` it after the run.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import json
import lzma
import os
import tarfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import docker
from docker.errors import APIError, BuildError, DockerException, ImageNotFound
from docker.utils import parse_repository_tag

from configs.schema import Limits
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.runtimes.docker.engine_faults import classify

_TARBALL_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2")
MAX_TAR_MEMBERS = 100_000
_HEADER_SLACK = 256 * 1024**2  # tar headers and padding read on top of the members' bytes
_MANIFEST_MAX = 1 << 20


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


class _OverBudget(Exception):
    """The decompressed stream needed more work than the tarball's budget allows."""


class _Budgeted:
    """A seekable read-only view of a (decompressed) stream that refuses to read or skip
    more than ``budget`` bytes in all, so a small compressed file cannot cost unbounded CPU
    (a forward seek in a compressed stream decompresses; a backward one starts over)."""

    def __init__(self, raw: BinaryIO, budget: int) -> None:
        self.raw, self.budget, self.pos, self.work = raw, budget, 0, 0

    def _spend(self, n: int) -> None:
        if self.work + n > self.budget:
            raise _OverBudget
        self.work += n

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            size = self.budget - self.work
        self._spend(size)
        data = self.raw.read(size)
        self.work -= size - len(data)
        self.pos += len(data)
        return data

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence not in (os.SEEK_SET, os.SEEK_CUR):
            raise OSError("only forward/backward seeks from the start or here are supported")
        target = offset if whence == os.SEEK_SET else self.pos + offset
        self._spend(target - self.pos if target >= self.pos else target)
        self.pos = self.raw.seek(target)
        return self.pos

    def tell(self) -> int:
        return self.pos


def _decompressed(path: Path) -> BinaryIO:
    """The tarball's bytes, decompressed on the fly (gzip, bzip2, xz or plain)."""
    with open(path, "rb") as handle:
        magic = handle.read(6)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if magic.startswith(b"BZh"):
        return bz2.open(path, "rb")  # type: ignore[return-value]
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def _scan_tarball(path: Path, limits: Limits) -> tuple[Any, set[str]]:
    """(parsed manifest.json or None, member names), one member at a time: stops as soon as
    the members' total size passes ``limits.max_image_bytes`` (``_OverBudget``)."""
    names: set[str] = set()
    manifest: Any = None
    total = count = 0
    with _decompressed(path) as raw:
        stream = _Budgeted(raw, limits.max_image_bytes + _HEADER_SLACK)
        with tarfile.open(fileobj=stream, mode="r:") as tar:  # type: ignore[call-overload]
            while (member := tar.next()) is not None:
                count += 1
                if count > MAX_TAR_MEMBERS:
                    raise EvaluationError(
                        FailureCode.IMAGE_NOT_LOADABLE,
                        f"the tarball has more than {MAX_TAR_MEMBERS:,} members; "
                        "a `docker save` of one image has far fewer",
                    )
                total += max(0, member.size)
                if total > limits.max_image_bytes:
                    raise _OverBudget
                name = member.name.lstrip("./")
                names.add(name)
                if name == "manifest.json" and member.isfile():
                    if member.size > _MANIFEST_MAX:
                        raise EvaluationError(
                            FailureCode.IMAGE_NOT_LOADABLE,
                            "the tarball's manifest.json is implausibly large",
                        )
                    handle = tar.extractfile(member)
                    manifest = json.loads(handle.read()) if handle else None
    return manifest, names


def inspect_tarball(path: str | os.PathLike[str], limits: Limits) -> tuple[str, list[str]]:
    """Check a ``docker save`` tarball without loading it: (image ID, tags it carries).

    File or unpacked members over the size limit → IMAGE_TOO_LARGE (the scan stops there,
    so its work is bounded by the limit); not a tar, too many members, no manifest.json,
    more than one image, or missing members → IMAGE_NOT_LOADABLE.
    """
    path = Path(path)
    size = path.stat().st_size
    limit = limits.max_image_bytes
    if size > limit:
        raise EvaluationError(
            FailureCode.IMAGE_TOO_LARGE,
            f"the image tarball is {_mib(size)}, over the limit of {_mib(limit)}",
        )
    not_loadable = FailureCode.IMAGE_NOT_LOADABLE
    try:
        manifest, members = _scan_tarball(path, limits)
    except _OverBudget:
        raise EvaluationError(
            FailureCode.IMAGE_TOO_LARGE,
            f"the image tarball unpacks to more than the limit of {_mib(limit)}",
        ) from None
    except (tarfile.TarError, EOFError, OSError, ValueError, zlib.error, lzma.LZMAError) as exc:
        raise EvaluationError(
            not_loadable, f"the image tarball is corrupt or not a tar archive ({exc})"
        ) from None
    if "manifest.json" not in members:
        raise EvaluationError(
            not_loadable, "the tarball has no manifest.json: make it with `docker save`"
        )
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
    return Acquired(ref, fresh=not existed, own_tags=() if existed else ref.tags)


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
    reference: str, limits: Limits, client: docker.DockerClient | None = None
) -> Acquired:
    """Ask the registry for ``reference``'s digest, then pull exactly that digest.

    Pulling by digest creates no local tag, so a reference named like a local image (the
    base image, an example) cannot move that tag; the registry is always asked, whatever
    the engine holds. ``fresh`` when the image was not in the engine before.
    """
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
        return acquire_pull(source, limits, client)
    check_size(ref, limits, client)
    return Acquired(ref)
