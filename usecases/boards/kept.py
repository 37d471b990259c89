"""A task's prepared board kept across restarts, so the first viewer after a start does not
wait for 10,000 rows to be read and prepared (about a second) before the first page.

The background preparation writes each task's board under its own weights to the blob
store (``boards/<task>.board``) when it changes, at most every ``WRITE_EVERY_S`` and once
more when the server stops. A start reads it back only when it was prepared under exactly
the same key (results version, data hashes, round weights, memory), task definition and
board code: anything else and the board is prepared from the rows as before, so a kept
board never shows other numbers than a fresh one would.

The file is JSON text, never pickle: a header line with the board's numbers, then one line
per entry and per source row, each decoded when a page first reads it (a page of 100 reads
100 of 10,000). It is signed with the server's key (``Sealer.mac``): a file altered, cut
short or written under another key is not used.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Hashable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast, overload

import numpy as np
import pandas as pd

from configs.schema import TaskSpec
from configs.vocabulary.axes import AXES
from configs.vocabulary.boards import BoardEntry
from dynascore.resolution import Resolution
from store.blobs import BlobNotFound
from usecases.boards.leaderboard import PreparedBoard
from usecases.service import Service

FORMAT = 1
MAGIC = b"dynaeval-board\n"
TAG_BYTES = 32
PURPOSE = b"kept board"  # what the server's key signs here (Sealer.mac)
WRITE_EVERY_S = 30.0  # at most one write per task this often while results keep landing
LOG = logging.getLogger(__name__)
Row = TypeVar("Row")
_ENCODER = json.JSONEncoder(check_circular=False)
# the code a prepared board's numbers come from: a board kept by other code is not used
_SOURCES = (
    "dynascore",
    "usecases/boards",
    "store/queries.py",
    "configs/schema.py",
    "configs/vocabulary",
)


class LazyRows(Sequence[Row]):
    """Rows kept as their JSON text, each decoded the first time it is read (read-only, as a
    prepared board's rows are; two threads decoding the same row at once get equal rows).
    The rows are what the board wrote (``encode``): their type is the caller's word."""

    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines
        self._rows: list[Row | None] = [None] * len(lines)

    def __len__(self) -> int:
        return len(self._lines)

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...

    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        row = self._rows[index]
        if row is None:
            row = self._rows[index] = cast(Row, json.loads(self._lines[index]))
        return row

    def __iter__(self) -> Iterator[Row]:
        return (self[i] for i in range(len(self)))


def blob_key(task: str) -> str:
    return f"boards/{task}.board"


def _fingerprint() -> str | None:
    """A digest of the source files a prepared board's numbers depend on and of the
    libraries that compute them, or None (nothing is kept) when a source is unreadable."""
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.blake2b(f"numpy {np.__version__} pandas {pd.__version__}".encode())
    try:
        for source in _SOURCES:
            path = root / source
            for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
                digest.update(file.relative_to(root).as_posix().encode() + b"\0")
                digest.update(file.read_bytes())
    except OSError:
        LOG.warning("the board code's sources cannot be read: boards are not kept", exc_info=True)
        return None
    return digest.hexdigest()


# Read once, when the server loads the code: files replaced later (an upgrade in place)
# must not sign the boards this process's code prepared.
_CODE = _fingerprint()


def code_fingerprint() -> str | None:
    """The fingerprint of the board code this process runs (see ``_fingerprint``)."""
    return _CODE


def key_digest(task: TaskSpec, key: Hashable) -> str | None:
    """What a kept board must have been prepared under to be used: the cache key, the
    task's whole definition and the board code (None: the code is unknown, keep nothing)."""
    code = code_fingerprint()
    if code is None:
        return None
    text = f"{FORMAT}\n{key!r}\n{task!r}\n{code}"
    return hashlib.blake2b(text.encode(), digest_size=32).hexdigest()


def encode(board: PreparedBoard, digest: str) -> bytes:
    """``board`` as the file's payload (see the module's docstring)."""
    header = {
        "format": FORMAT,
        "key": digest,
        "instance_memory_gib": board.instance_memory_gib,
        "ids": board.ids.tolist(),
        "performance": board.performance.tolist(),
        "units": {axis: board.units[axis].tolist() for axis in AXES},
        "amrs": board.amrs,
        "performance_ci": {side: board.performance_ci[side].tolist() for side in ("low", "high")},
        "unranked": board.unranked,
        "rates": {str(axis): float(rate) for axis, rate in board.rates.items()},
        "resolution": {axis: value.to_dict() for axis, value in board.resolution.items()},
        "warnings": board.warnings,
        "entries": len(board.entries),
        "source_rows": len(board.source_rows),
    }
    line = _ENCODER.encode  # a board's rows hold no cycles: not checked for (20 % faster)
    lines = [json.dumps(header)]
    lines += [line(entry) for entry in board.entries]
    lines += [line(row) for row in board.source_rows]
    return "\n".join(lines).encode()


def decode(task: TaskSpec, payload: bytes, digest: str) -> PreparedBoard | None:
    """The board in ``payload`` when it was kept under ``digest``, else None."""
    lines = payload.split(b"\n")
    header = json.loads(lines[0])
    if header.get("format") != FORMAT or header.get("key") != digest:
        return None
    entries, sources = int(header["entries"]), int(header["source_rows"])
    if len(lines) != 1 + entries + sources:
        return None
    ids = pd.Index(header["ids"], dtype=object)
    ci = header["performance_ci"]
    return PreparedBoard(
        task=task,
        instance_memory_gib=float(header["instance_memory_gib"]),
        ids=ids,
        performance=np.array(header["performance"], dtype=float),
        units=pd.DataFrame(
            {axis: np.array(header["units"][axis], dtype=float) for axis in AXES}, index=ids
        ),
        amrs=header["amrs"],
        entries=LazyRows[BoardEntry](lines[1 : 1 + entries]),
        performance_ci=pd.DataFrame(
            {side: np.array(ci[side], dtype=float) for side in ("low", "high")}, index=ids
        ),
        unranked=header["unranked"],
        rates=pd.Series(header["rates"], dtype=float),
        resolution={axis: Resolution(**value) for axis, value in header["resolution"].items()},
        warnings=header["warnings"],
        source_rows=LazyRows[dict[str, Any]](lines[1 + entries :]),
    )


def write(service: Service, key: Hashable, board: PreparedBoard) -> None:
    """Keep ``board`` (prepared under ``key``, from the task definition it holds) for the
    next start."""
    digest = key_digest(board.task, key)
    if digest is None:
        return
    payload = encode(board, digest)
    stored = MAGIC + service.sealer.mac(payload, PURPOSE) + payload
    service.blobs.put_bytes(blob_key(board.task.name), stored)


def read(service: Service, task: TaskSpec, key: Hashable) -> PreparedBoard | None:
    """The kept board of ``task`` when it was prepared under ``key`` and verifies."""
    digest = key_digest(task, key)
    if digest is None:
        return None
    try:
        stored = service.blobs.get_bytes(blob_key(task.name))
    except BlobNotFound:
        return None
    except Exception:  # a blob store outage: the board is prepared from the rows instead
        LOG.warning("the kept board of %s could not be read", task.name, exc_info=True)
        return None
    tag, payload = stored[len(MAGIC) : len(MAGIC) + TAG_BYTES], stored[len(MAGIC) + TAG_BYTES :]
    if not stored.startswith(MAGIC) or not service.sealer.verify(payload, tag, PURPOSE):
        LOG.warning("the kept board of %s does not verify; preparing it again", task.name)
        return None
    try:
        return decode(task, payload, digest)
    except (ValueError, KeyError, TypeError):  # a format this code does not read
        LOG.warning("the kept board of %s is not readable; preparing it again", task.name)
        return None
