"""Checking a ``docker save`` tarball before the engine sees it, at bounded cost.

A tarball is read as a stream, one member at a time, and never unpacked: the scan stops as
soon as the members' sizes pass the image size limit, and the decompression it may cost is
capped too, so a small compressed "bomb" cannot make the worker spend unbounded CPU.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from configs.schema import Limits
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.runtimes.docker.ustar import Header, TarRefused, UstarReader

MAX_TAR_MEMBERS = 100_000
_MANIFEST_MAX = 1 << 20
_IMAGE_DIGEST = re.compile(r"[0-9a-f]{64}")
# A config is JSON of a few KiB (tens with a long history): files up to this size are
# hashed as they pass, and a larger one the manifest names as the config is refused.
CONFIG_MAX = 8 << 20


def mib(n: int) -> str:
    """``n`` bytes in MiB, for messages."""
    return f"{n / 1024**2:.1f} MiB"


class _OverBudget(Exception):
    """The decompressed stream is longer than the tarball's budget allows."""


class _OverRatio(_OverBudget):
    """The gzip stream unpacks to more than ``MAX_RATIO`` times what it has consumed."""


class _OverTime(Exception):
    """The scan used more CPU time than the tarball's size warrants."""


# A gzipped `docker save` unpacks to 1.5-4x its size; a stream that unpacks to more than
# this is refused as a bomb as soon as it passes (the real limit is the image limit).
MAX_RATIO = 32
RATIO_FLOOR = 16 << 20  # a tiny tarball's padding compresses far better: always allowed
# CPU seconds the scan may use: a base, plus a share per compressed MiB (inflating a real
# image costs ~0.01 s per MiB here); a refusal of a bomb stops far sooner, at the ratio.
CPU_BASE_S, CPU_PER_MIB_S = 1.0, 0.05


_DRAIN_CHUNK = 1 << 20


class _Budgeted:
    """A seekable read-only view of a (decompressed) stream that refuses to produce or skip
    more than ``budget`` bytes in all, so a small compressed "bomb" is refused as soon as
    what it unpacks to passes the budget (a forward seek in a compressed stream
    decompresses; a backward one starts over). Bytes are counted as they come out of the
    decompressor, never charged for a request the stream cannot fill: a stream of exactly
    ``budget`` bytes is read whole, one byte more is refused."""

    def __init__(
        self, raw: BinaryIO, budget: int, cpu_s: float, cpu_clock: Callable[[], float]
    ) -> None:
        self.raw, self.budget, self.pos, self.work = raw, budget, 0, 0
        self.cpu_clock, self.cpu_deadline = cpu_clock, cpu_clock() + cpu_s

    def read(self, size: int | None = -1) -> bytes:
        if self.cpu_clock() > self.cpu_deadline:
            raise _OverTime
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
        if isinstance(self.raw, _SingleGzip) and target >= self.pos:
            while self.pos < target:  # inflating: piece by piece, the clock checked each time
                if not self.read(min(_DRAIN_CHUNK, target - self.pos)):
                    break
            return self.pos
        self.work += cost
        self.pos = self.raw.seek(target)
        return self.pos

    def tell(self) -> int:
        return self.pos

    def drain_zeros(self) -> bool:
        """Read to the end under the budget (the engine may decompress it all when it loads
        the tarball); whether everything after the archive was zero padding."""
        zeros = True
        while chunk := self.read(_DRAIN_CHUNK):
            zeros = zeros and not chunk.strip(b"\x00")
        return zeros


class _SingleGzip:
    """One gzip member, inflated on the fly: a second member, or bytes after the first,
    are refused (``docker load`` reads them, the trailer check would not), as is a file
    that ends early."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.handle = open(path, "rb")  # noqa: SIM115 - closed by close()
        self.inflater = zlib.decompressobj(wbits=31)
        self.pending, self.pos, self.produced = bytearray(), 0, 0

    def read(self, size: int = -1) -> bytes:
        want = size if size is not None and size >= 0 else _DRAIN_CHUNK
        while len(self.pending) < want and not self.inflater.eof:
            # input the inflater could not yet turn into output waits in unconsumed_tail
            chunk = self.inflater.unconsumed_tail or self.handle.read(_IN_CHUNK)
            if not chunk:
                raise EOFError("the gzip stream ends before its end marker")
            out = self.inflater.decompress(chunk, want - len(self.pending))
            self.pending += out
            self.produced += len(out)
            # a bomb is told by its ratio so far, long before the budget: refused early
            consumed = self.handle.tell() - len(self.inflater.unconsumed_tail)
            if self.produced > max(RATIO_FLOOR // 4, MAX_RATIO * consumed):
                raise _OverRatio
        if self.inflater.eof and (self.inflater.unused_data or self.handle.read(1)):
            raise UnsupportedCompression(
                "the image tarball is gzip with more than one member or trailing bytes; "
                "compress it as one stream (`docker save IMAGE | gzip`)"
            )
        data = bytes(self.pending[:want])
        del self.pending[:want]
        self.pos += len(data)
        return data

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Forwards by inflating and dropping; backwards by starting over (the caller's
        budget has counted what either costs)."""
        target = offset if whence == os.SEEK_SET else self.pos + offset
        if target < self.pos:
            self.close()
            self.__init__(self.path)  # type: ignore[misc]
        while self.pos < target and self.read(min(_DRAIN_CHUNK, target - self.pos)):
            pass
        return self.pos

    def close(self) -> None:
        self.handle.close()

    def __enter__(self) -> _SingleGzip:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class UnsupportedCompression(Exception):
    """A compression the inspection does not read within its bounds."""


_IN_CHUNK = 64 << 10
_REFUSED_MAGIC = {
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
}


def _decompressed(path: Path) -> BinaryIO:
    """The tarball's bytes: plain, or one gzip stream inflated on the fly. Other
    compressions are refused: a ``docker save`` tarball is plain, or gzipped by the CLI."""
    with open(path, "rb") as handle:
        magic = handle.read(6)
    if magic.startswith(b"\x1f\x8b"):
        return _SingleGzip(path)  # type: ignore[return-value]
    if magic[1:4] == b"\x2a\x4d\x18" and magic[0] & 0xF0 == 0x50:  # zstd skippable frame
        raise UnsupportedCompression(
            "the image tarball starts with a zstd frame; upload it plain or gzipped "
            "(`docker save IMAGE | gzip`)"
        )
    for prefix, name in _REFUSED_MAGIC.items():
        if magic.startswith(prefix):
            raise UnsupportedCompression(
                f"the image tarball is {name}-compressed; upload it plain or gzipped "
                "(`docker save IMAGE | gzip`)"
            )
    return open(path, "rb")


def _gzip_declared_size(path: Path) -> int | None:
    """What a gzip file's trailer says its (last member) unpacks to, modulo 2**32: a lower
    bound on the real size of a well-formed single-member file, read without decompressing
    anything (a second member is refused by the scan)."""
    with open(path, "rb") as handle:
        if handle.read(2) != b"\x1f\x8b" or os.fstat(handle.fileno()).st_size < 18:
            return None  # not gzip, or too short to have a trailer (the scan says corrupt)
        handle.seek(-4, os.SEEK_END)
        return int.from_bytes(handle.read(4), "little")


def _cpu_seconds(path: Path) -> float:
    return CPU_BASE_S + CPU_PER_MIB_S * path.stat().st_size / 2**20


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(2) == b"\x1f\x8b"


def _budget(path: Path, limits: Limits) -> int:
    """How many bytes the scan may unpack: the image limit, and no more than
    ``MAX_RATIO`` times the compressed file (no real image compresses better) unless that
    is under ``RATIO_FLOOR``, which costs milliseconds to inflate."""
    size = path.stat().st_size
    if not _is_gzip(path):
        return size
    return min(limits.max_image_bytes, max(size * MAX_RATIO, RATIO_FLOOR))


@dataclass(frozen=True)
class _Member:
    """What a tarball member is: a regular file, a directory, or a link to another name."""

    kind: str  # "file", "dir", "symlink" or "hardlink"
    target: str | None = None  # a link's target, as an archive name


def _refuse(message: str) -> EvaluationError:
    return EvaluationError(FailureCode.IMAGE_NOT_LOADABLE, message)


def _archive_name(name: str, what: str = "a member") -> str:
    """``name`` as a plain path inside the archive (one leading ``./`` allowed); anything
    that could land outside it, or that two readers could read differently, is refused."""
    plain = name[2:] if name.startswith("./") else name
    plain = plain.rstrip("/") if plain.endswith("/") and plain.strip("/") else plain
    if (
        not plain
        or plain.startswith("/")
        or "\\" in plain
        or "\x00" in plain
        or ".." in plain.split("/")
        or posixpath.normpath(plain) != plain
    ):
        raise _refuse(
            f"the tarball has {what} named {name[:120]!r}: names must be plain paths inside "
            "the archive (no absolute paths, '..', or empty parts)"
        )
    return plain


def _member(header: Header, name: str) -> _Member:
    """The member's kind; links are resolved to archive names and must stay inside."""
    if header.kind in ("dir", "file"):
        return _Member(header.kind)
    if header.kind == "symlink":
        if header.linkname.startswith("/"):
            raise _refuse(f"the tarball's symlink {name!r} points outside it (absolute)")
        target = posixpath.normpath(posixpath.join(posixpath.dirname(name), header.linkname))
        if target == ".." or target.startswith("../"):
            raise _refuse(f"the tarball's symlink {name!r} points outside it")
        return _Member("symlink", target)
    return _Member("hardlink", _archive_name(header.linkname, f"a hard link in {name!r} to"))


def _resolve(name: str, members: Mapping[str, _Member]) -> str | None:
    """The regular file ``name`` stands for, following links inside the archive; None when
    it is missing, not a file, or a chain too long to be one `docker save` writes."""
    for _ in range(8):
        found = members.get(name)
        if found is None or found.kind == "dir":
            return None
        if found.kind == "file":
            return name
        assert found.target is not None
        name = found.target
    return None


@dataclass(frozen=True)
class _Scan:
    """What a scan read: the parsed manifest.json (None if absent), every member by archive
    name, and the SHA-256 of each file small enough to be a config (a link may lead to it)."""

    manifest: Any
    members: dict[str, _Member]
    config_digests: dict[str, str]


def _scan_tarball(path: Path, limits: Limits, cpu_clock: Callable[[], float]) -> _Scan:
    """Every member, one at a time: stops as soon as the members' total size or the
    decompressed bytes pass the budget (``_OverBudget``) or the CPU time does
    (``_OverTime``). The stream is read to its end: what the engine would unpack is what
    the budget bounds."""
    members: dict[str, _Member] = {}
    digests: dict[str, str] = {}
    manifest: Any = None
    total = 0
    with _decompressed(path) as raw:
        stream = _Budgeted(raw, _budget(path, limits), _cpu_seconds(path), cpu_clock)
        tar = UstarReader(stream)
        while (header := tar.next()) is not None:
            if len(members) >= MAX_TAR_MEMBERS:
                raise _refuse(
                    f"the tarball has more than {MAX_TAR_MEMBERS:,} members; "
                    "a `docker save` of one image has far fewer"
                )
            total += header.size
            if total > limits.max_image_bytes:
                raise _OverBudget
            name = _archive_name(header.name)
            _check_parents(name, members)
            member = _member(header, name)
            earlier = members.get(name)
            if earlier is not None and not (earlier.kind == member.kind == "dir"):
                raise _refuse(f"the tarball has two members named {name!r}")
            members[name] = member
            if name == "manifest.json" and header.kind == "file":
                manifest = json.loads(tar.read_data(header, _MANIFEST_MAX))
            elif header.kind == "file" and header.size <= CONFIG_MAX:  # may be the config
                digests[name] = hashlib.sha256(tar.read_data(header, CONFIG_MAX)).hexdigest()
        if not stream.drain_zeros():
            raise _refuse("the tarball has data after its end (only zero padding may follow)")
    _check_links(members)
    return _Scan(manifest, members, digests)


def _check_parents(name: str, members: Mapping[str, _Member]) -> None:
    """No member may lie under a link: ``x -> .`` then ``x/manifest.json`` is a second
    manifest to ``docker load`` that a reader of names alone never sees."""
    parts = name.split("/")
    for depth in range(1, len(parts)):
        parent = members.get("/".join(parts[:depth]))
        if parent is not None and parent.kind != "dir":
            raise _refuse(
                f"the tarball's member {name[:120]!r} lies under {'/'.join(parts[:depth])!r}, "
                "which is not a directory"
            )


def _check_links(members: Mapping[str, _Member]) -> None:
    """Every link must end at a regular file of the archive: a link to a directory would
    let later names reach through it, one to nothing may be filled by the engine."""
    for name, member in members.items():
        if member.kind in ("symlink", "hardlink") and _resolve(name, members) is None:
            raise _refuse(
                f"the tarball's link {name[:120]!r} does not lead to a file of the archive "
                "(links to directories, to nothing, or in long chains are refused)"
            )


def inspect_tarball(
    path: str | os.PathLike[str],
    limits: Limits,
    cpu_clock: Callable[[], float] = time.thread_time,
) -> tuple[str, list[str]]:
    """Check a ``docker save`` tarball without loading it: (image ID, tags it carries).

    File or unpacked members over the size limit, or a gzip stream unpacking to more than
    ``MAX_RATIO`` times its size → IMAGE_TOO_LARGE (the scan stops there, so its work is
    bounded); a scan over its CPU time (``cpu_clock``: this thread's) → IMAGE_TOO_LARGE;
    bzip2, xz, zstd or multi-member gzip, not a tar, too many
    members, names outside the archive, links leaving it, special files, no manifest.json,
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
        scan = _scan_tarball(path, limits, cpu_clock)
    except _OverRatio:
        raise EvaluationError(
            FailureCode.IMAGE_TOO_LARGE,
            f"the image tarball unpacks to more than {MAX_RATIO} times its gzipped size, "
            "which no real image does (a decompression bomb?)",
        ) from None
    except _OverBudget:
        if not _is_gzip(path):  # a plain file's budget is its size: it ended too soon
            raise _refuse(
                "the image tarball ends inside a member (cut short?): make it with `docker save`"
            ) from None
        budget = _budget(path, limits)
        why = (
            f", more than {MAX_RATIO} times its gzipped size, which no real image does "
            "(a decompression bomb?)"
            if budget < limit
            else f"; the limit is {mib(limit)}"
        )
        raise EvaluationError(
            FailureCode.IMAGE_TOO_LARGE,
            f"the image tarball unpacks to more than {mib(budget)}{why}",
        ) from None
    except _OverTime:
        raise EvaluationError(
            FailureCode.IMAGE_TOO_LARGE,
            f"checking the image tarball took more than {_cpu_seconds(path):.1f} s of CPU "
            "time, more than an image of its size needs",
        ) from None
    except UnsupportedCompression as exc:
        raise EvaluationError(FailureCode.IMAGE_NOT_LOADABLE, str(exc)) from None
    except RecursionError:  # a manifest.json nested deep enough to exhaust the decoder
        raise EvaluationError(
            not_loadable, "the tarball's manifest.json is nested too deeply"
        ) from None
    except TarRefused as exc:
        raise EvaluationError(
            not_loadable,
            f"the image tarball is corrupt or not a tar archive as `docker save` writes one: {exc}",
        ) from None
    except (EOFError, OSError, ValueError, zlib.error) as exc:
        raise EvaluationError(
            not_loadable, f"the image tarball is corrupt or not a tar archive ({exc})"
        ) from None
    return _image_of(scan)


def _image_of(scan: _Scan) -> tuple[str, list[str]]:
    """(image ID, tags) from a scanned tarball's manifest: one image, every member it
    names present, and its config named by the config's own digest."""
    not_loadable = FailureCode.IMAGE_NOT_LOADABLE
    manifest, members = scan.manifest, scan.members
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
    named = [_archive_name(name, "a manifest entry") for name in [config, *layers]]
    missing = [name for name in named if _resolve(name, members) is None]
    if missing:
        raise EvaluationError(
            not_loadable,
            f"the tarball is incomplete: {missing[:3]} are not files in it (a layer or "
            "config may be a link only to another file of the archive)",
        )
    # `docker save` names the config by its digest, the image ID: <hex>.json (legacy layout)
    # or blobs/sha256/<hex> (OCI layout). Anything else is no image Docker made.
    digest = Path(config).name.removesuffix(".json")
    if not _IMAGE_DIGEST.fullmatch(digest):
        raise EvaluationError(
            not_loadable,
            "the tarball's manifest.json names a config that is not an image digest "
            "(<64 hex digits>.json or blobs/sha256/<64 hex digits>)",
        )
    _check_config_digest(scan, named[0], digest)
    return "sha256:" + digest, list(tags or [])


def _check_config_digest(scan: _Scan, config: str, digest: str) -> None:
    """The image ID is the config's SHA-256: a config under another image's ID would give
    the submission an ID that is not its image's (and the engine one it did not expect)."""
    resolved = _resolve(config, scan.members)
    actual = scan.config_digests.get(resolved or "")
    if actual is None:
        raise _refuse(
            f"the tarball's config {config[:120]!r} is over {mib(CONFIG_MAX)}, which no "
            "image config is"
        )
    if actual != digest:
        raise _refuse(
            f"the tarball's config does not hash to the image ID its name claims "
            f"(sha256:{digest}): its SHA-256 is sha256:{actual}. `docker save` names it by "
            "its own digest"
        )


def _strings(value: object) -> bool:
    """``value`` is a list of strings (a manifest's Layers or RepoTags)."""
    return isinstance(value, list) and all(isinstance(item, str) for item in value)
