"""A strict reader of the tar headers ``docker save`` writes, and nothing else.

Python's ``tarfile`` and Go's ``archive/tar`` (which ``docker load`` uses) disagree on
extensions: a global PAX header, a ``prefix`` field without ustar magic, a PAX ``path``
beside a GNU long name, an unparsable header Python takes for the end. Each lets one
archive name its members differently to the two readers, so a check that reads one archive
would approve another. ``docker save`` writes POSIX ustar headers (Go's writer adds a PAX
``x`` header only for numbers too big for ustar), so this reader accepts exactly that:

- every header has ustar magic and version, a correct checksum and octal numbers;
- the types are file, directory, symlink, hard link, and a PAX ``x`` header carrying only
  ``size`` and times or ids, for the one header after it;
- names and link names are UTF-8 without control characters;
- the archive ends with two zero blocks.

Anything else is ``TarRefused``. Data is read in bounded pieces (a PAX header's at most
``MAX_PAX_BYTES``), so no header makes the reader ask for much at once.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Protocol

BLOCK = 512
MAX_PAX_BYTES = 64 << 10
KINDS = {b"0": "file", b"\x00": "file", b"5": "dir", b"2": "symlink", b"1": "hardlink"}
PAX_KEYS = frozenset({"size", "mtime", "atime", "ctime", "uid", "gid", "uname", "gname"})
_MAGIC, _VERSION = b"ustar\x00", b"00"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_OCTAL = re.compile(rb"^[0-7]*$")


class TarRefused(ValueError):
    """An archive this reader will not read the same way ``docker load`` does."""


class Stream(Protocol):
    def read(self, size: int = -1) -> bytes: ...

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int: ...


@dataclass(frozen=True)
class Header:
    """One member: its full name, its kind, its data size and, for links, the target."""

    name: str
    kind: str  # "file", "dir", "symlink" or "hardlink"
    size: int
    linkname: str


class UstarReader:
    """Headers one at a time from ``stream``; a member's data is skipped unless read."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self._unread = 0  # data (with padding) of the last member nobody read

    def next(self) -> Header | None:
        """The next member's header, or None at the end of the archive."""
        self._skip_unread()
        size_override: int | None = None
        while True:
            block = read_exact(self.stream, BLOCK)
            if block == bytes(BLOCK):
                if read_exact(self.stream, BLOCK) != bytes(BLOCK):
                    raise TarRefused("a zero block inside the archive, not at its end")
                return None
            typeflag = _check_block(block)
            size = _octal(block[124:136], "size")
            if typeflag == b"x":
                if size_override is not None:
                    raise TarRefused("two PAX headers in a row")
                size_override = _pax_size(read_exact(self.stream, _padded(size)), size)
                continue
            if typeflag not in KINDS:
                raise TarRefused(
                    f"a member of type {typeflag!r}: only files, directories and links"
                )
            header = _header(block, typeflag, size if size_override is None else size_override)
            self._unread = _padded(header.size)
            return header

    def read_data(self, header: Header, limit: int) -> bytes:
        """The data of the member ``next`` just returned (at most ``limit`` bytes)."""
        if header.size > limit:
            raise TarRefused(f"{header.name!r} is implausibly large ({header.size} bytes)")
        data = read_exact(self.stream, _padded(header.size))[: header.size]
        self._unread = 0
        return data

    def _skip_unread(self) -> None:
        if self._unread:
            self.stream.seek(self._unread, os.SEEK_CUR)
            self._unread = 0


def read_exact(stream: Stream, size: int) -> bytes:
    """``size`` bytes, or EOFError when the stream ends first."""
    parts, left = [], size
    while left > 0:
        chunk = stream.read(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the tarball ends inside a member")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


def _check_block(block: bytes) -> bytes:
    """The block's type flag, once its magic and checksum are what ustar writes."""
    if block[257:263] != _MAGIC or block[263:265] != _VERSION:
        raise TarRefused("a header without POSIX ustar magic")
    stored = _octal(block[148:156], "checksum")
    if stored != sum(block[:148]) + 8 * 32 + sum(block[156:]):
        raise TarRefused("a header whose checksum is wrong")
    return block[156:157]


def _octal(field: bytes, what: str) -> int:
    digits = field.strip(b"\x00 ")
    if not _OCTAL.match(digits):
        raise TarRefused(f"a header whose {what} is not an octal number")
    return int(digits or b"0", 8)


def _text(field: bytes, what: str) -> str:
    raw = field.split(b"\x00", 1)[0]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TarRefused(f"a {what} that is not UTF-8") from None
    if _CONTROL.search(text):
        raise TarRefused(f"a {what} with control characters")
    return text


def _header(block: bytes, typeflag: bytes, size: int) -> Header:
    name, prefix = _text(block[0:100], "name"), _text(block[345:500], "name prefix")
    full = f"{prefix}/{name}" if prefix else name
    kind = KINDS[typeflag]
    if kind != "file" and size:
        raise TarRefused(f"{full!r}: a {kind} with data")
    if kind == "file" and full.endswith("/"):
        raise TarRefused(f"{full!r}: a file named like a directory")
    return Header(full, kind, size, _text(block[157:257], "link name"))


def _pax_size(data: bytes, size: int) -> int | None:
    """The size a PAX header gives its member (None: keep the header's); other keys than
    sizes, times and ids (``path``, ``linkpath``, vendor extensions) are refused."""
    if size > MAX_PAX_BYTES:
        raise TarRefused("a PAX header larger than any `docker save` writes")
    records, found = data[:size], None
    while records:
        length_text, _, _ = records.partition(b" ")
        if not length_text.isdigit() or int(length_text) > len(records) or int(length_text) < 5:
            raise TarRefused("a malformed PAX record")
        record, records = records[: int(length_text)], records[int(length_text) :]
        key, sep, value = record[len(length_text) + 1 : -1].partition(b"=")
        if not sep or not record.endswith(b"\n"):
            raise TarRefused("a malformed PAX record")
        name = key.decode("ascii", "replace")
        if name not in PAX_KEYS:
            raise TarRefused(f"a PAX record {name[:40]!r}: only sizes, times and ids")
        if name == "size":
            if not value.isdigit():
                raise TarRefused("a PAX size that is not a number")
            found = int(value)
    return found
