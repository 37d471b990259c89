"""Checking a ``docker save`` tarball before the engine sees it, at bounded cost.

A tarball is read as a stream, one member at a time, and never unpacked: the scan stops as
soon as the members' sizes pass the image size limit, and the decompression it may cost is
capped too, so a small compressed "bomb" cannot make the worker spend unbounded CPU.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import tarfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO

from configs.schema import Limits
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError

MAX_TAR_MEMBERS = 100_000
_HEADER_SLACK = 256 * 1024**2  # tar headers and padding read on top of the members' bytes
_MANIFEST_MAX = 1 << 20


def mib(n: int) -> str:
    """``n`` bytes in MiB, for messages."""
    return f"{n / 1024**2:.1f} MiB"


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
            f"the image tarball is {mib(size)}, over the limit of {mib(limit)}",
        )
    not_loadable = FailureCode.IMAGE_NOT_LOADABLE
    try:
        manifest, members = _scan_tarball(path, limits)
    except _OverBudget:
        raise EvaluationError(
            FailureCode.IMAGE_TOO_LARGE,
            f"the image tarball unpacks to more than the limit of {mib(limit)}",
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
