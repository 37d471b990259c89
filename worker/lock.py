"""One live worker per worker id on a host: the id owns the containers labelled with it,
and a worker removes those on start, so two live workers sharing an id would kill each
other's models.

A lock folder has a random *domain* id, created once. Holding the lock for id X in domain D
proves that every earlier worker (X, D) is dead, so its running jobs may be settled at once;
two hosts or containers that share an id but not a lock folder have different domains."""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
import uuid
from pathlib import Path
from types import TracebackType


class WorkerIdInUse(RuntimeError):
    """Another live process on this host runs a worker with the same id."""


def lock_dir() -> Path:
    """``$DYNAEVAL_LOCK_DIR`` or a folder in the system's temporary directory."""
    return Path(
        os.environ.get("DYNAEVAL_LOCK_DIR", Path(tempfile.gettempdir()) / "dynaeval-workers")
    )


def lock_domain(folder: Path) -> str:
    """The domain id of lock ``folder``, created on first use. Atomic: the id is written to
    a private file first and hard-linked into place, so concurrent first users agree and
    nobody ever reads a half-written id."""
    path = folder / "domain.id"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        draft = folder / f".domain-{uuid.uuid4().hex}"
        draft.write_text(uuid.uuid4().hex)
        try:
            os.link(draft, path)
        except FileExistsError:
            pass  # another worker created it first: theirs is the domain
        finally:
            draft.unlink()
    return path.read_text().strip()


class WorkerLock:
    """An exclusive, non-blocking ``flock`` on a file named after the worker id. The kernel
    drops it when the process dies, so a crashed worker never blocks its successor."""

    def __init__(self, worker_id: str) -> None:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", worker_id)
        self.path = lock_dir() / f"{safe}.lock"
        self._fd: int | None = None
        self.domain = ""  # set once the lock is held: see lock_domain

    def __enter__(self) -> WorkerLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise WorkerIdInUse(
                f"a worker with id {self.path.stem!r} already runs on this host; "
                "give this one another name (dynaeval worker --name ...)"
            ) from None
        self._fd = fd
        try:
            self.domain = lock_domain(self.path.parent)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
