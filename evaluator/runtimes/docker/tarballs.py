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
import re
import tarfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO

from configs.schema import Limits
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError

MAX_TAR_MEMBERS = 100_000
_MANIFEST_MAX = 1 << 20
_IMAGE_DIGEST = re.compile(r"[0-9a-f]{64}")


def mib(n: int) -> str:
    """``n`` bytes in MiB, for messages."""
    return f"{n / 1024**2:.1f} MiB"


class _OverBudget(Exception):
    """The decompressed stream is longer than the tarball's budget allows."""


_DRAIN_CHUNK = 1 << 20


class _Budgeted:
    """A seekable read-only view of a (decompressed) stream that refuses to produce or skip
    more than ``budget`` bytes in all, so a small compressed "bomb" is refused as soon as
    what it unpacks to passes the budget (a forward seek in a compressed stream
    decompresses; a backward one starts over). Bytes are counted as they come out of the
    decompressor, never charged for a request the stream cannot fill: a stream of exactly
    ``budget`` bytes is read whole, one byte more is refused."""

    def __init__(self, raw: BinaryIO, budget: int) -> None:
        self.raw, self.budget, self.pos, self.work = raw, budget, 0, 0

    def read(self, size: int | None = -1) -> bytes:
        allowed = self.budget - self.work
        if size is None or size < 0 or size > allowed:
            size = allowed + 1  # one byte past the budget tells whether the stream goes on
        data = self.raw.read(size)
        self.work += len(data)
        if self.work > self.budget:
            raise _OverBudget
        self.pos += len(data)
        return data

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence not in (os.SEEK_SET, os.SEEK_CUR):
            raise OSError("only forward/backward seeks from the start or here are supported")
        target = offset if whence == os.SEEK_SET else self.pos + offset
        cost = target - self.pos if target >= self.pos else target
        if self.work + cost > self.budget:  # refused before the decompressor runs
            raise _OverBudget
        self.work += cost
        self.pos = self.raw.seek(target)
        return self.pos

    def tell(self) -> int:
        return self.pos

    def drain(self) -> None:
        """Read to the end (trailing padding or junk after the archive) under the budget: the
        engine may decompress it all when it loads the tarball."""
        while self.read(_DRAIN_CHUNK):
            pass


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


def _gzip_declared_size(path: Path) -> int | None:
    """What a gzip file's trailer says its (last member) unpacks to, modulo 2**32: a lower
    bound on the real size of a well-formed file, read without decompressing anything."""
    with open(path, "rb") as handle:
        if handle.read(2) != b"\x1f\x8b" or os.fstat(handle.fileno()).st_size < 18:
            return None  # not gzip, or too short to have a trailer (the scan says corrupt)
        handle.seek(-4, os.SEEK_END)
        return int.from_bytes(handle.read(4), "little")


def _scan_tarball(path: Path, limits: Limits) -> tuple[Any, set[str]]:
    """(parsed manifest.json or None, member names), one member at a time: stops as soon as
    the members' total size or the decompressed bytes pass ``limits.max_image_bytes``
    (``_OverBudget``). The stream is read to its end: what the engine would unpack is what
    the limit bounds."""
    names: set[str] = set()
    manifest: Any = None
    total = count = 0
    with _decompressed(path) as raw:
        stream = _Budgeted(raw, limits.max_image_bytes)
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
        stream.drain()
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
    declared = _gzip_declared_size(path)
    if declared is not None and declared > limit:  # refused without decompressing a byte
        raise EvaluationError(
            FailureCode.IMAGE_TOO_LARGE,
            f"the image tarball unpacks to more than the limit of {mib(limit)} "
            f"(its gzip trailer declares {mib(declared)})",
        )
    not_loadable = FailureCode.IMAGE_NOT_LOADABLE
    try:
        manifest, members = _scan_tarball(path, limits)
    except _OverBudget:
        raise EvaluationError(
            FailureCode.IMAGE_TOO_LARGE,
            f"the image tarball unpacks to more than the limit of {mib(limit)}",
        ) from None
    except RecursionError:  # a manifest.json nested deep enough to exhaust the decoder
        raise EvaluationError(
            not_loadable, "the tarball's manifest.json is nested too deeply"
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
    config, layers, tags = entry.get("Config"), entry.get("Layers"), entry.get("RepoTags")
    if not _strings(layers) or not layers:
        raise EvaluationError(
            not_loadable, "the tarball's manifest.json needs 'Layers': a list of file names"
        )
    if tags is not None and not _strings(tags):
        raise EvaluationError(
            not_loadable, "the tarball's manifest.json has 'RepoTags' that are not a list of names"
        )
    if not isinstance(config, str):
        raise EvaluationError(
            not_loadable, "the tarball's manifest.json needs 'Config': a file name"
        )
    missing = [name for name in [config, *layers] if name not in members]
    if missing:
        raise EvaluationError(not_loadable, f"the tarball is incomplete: missing {missing[:3]}")
    # `docker save` names the config by its digest, the image ID: <hex>.json (legacy layout)
    # or blobs/sha256/<hex> (OCI layout). Anything else is no image Docker made.
    digest = Path(config).name.removesuffix(".json")
    if not _IMAGE_DIGEST.fullmatch(digest):
        raise EvaluationError(
            not_loadable,
            "the tarball's manifest.json names a config that is not an image digest "
            "(<64 hex digits>.json or blobs/sha256/<64 hex digits>)",
        )
    return "sha256:" + digest, list(tags or [])


def _strings(value: object) -> bool:
    """``value`` is a list of strings (a manifest's Layers or RepoTags)."""
    return isinstance(value, list) and all(isinstance(item, str) for item in value)
