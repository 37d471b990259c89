"""A throwaway PostgreSQL cluster for the tests: Debian's server binaries, a data folder in
a temp directory, listening on a free loopback port, stopped (and its files removed) when
the session ends. Each test gets a fresh database in it.

Nothing here downloads anything; without Debian's ``postgresql`` package the tests that
need it skip locally and fail in CI (see ``components.skip_or_fail``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, text

from evaluator.runtimes.process import free_port

_BIN_ROOT = Path("/usr/lib/postgresql")
_RUN_AS = "postgres"  # initdb refuses to run as root


def server_bin() -> Path | None:
    """The newest installed server's bin folder (holding initdb and pg_ctl), if any."""
    if not _BIN_ROOT.is_dir():
        return None
    versions = sorted(
        (p for p in _BIN_ROOT.iterdir() if (p / "bin" / "initdb").exists()),
        key=lambda p: int(p.name) if p.name.isdigit() else 0,
    )
    return versions[-1] / "bin" if versions else None


@dataclass(frozen=True)
class Cluster:
    """A running cluster: its port and how to reach a database in it. A cluster started by
    ``running_cluster`` also knows its folder, so a test can stop and start its server (an
    outage) on the same port and data."""

    port: int
    root: Path | None = None
    binaries: Path | None = None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: roll back and disconnect every client; ``immediate``:
        abort, as a crash would). Waits until it is down; stopping a stopped server is fine."""
        subprocess.run(
            _as_server_user([*self._pg_ctl(), "-m", mode, "-w", "-t", "60", "stop"]),
            check=False,
            capture_output=True,
            timeout=90,
        )

    def start(self) -> None:
        """Start the server again on the same port and data; waits until it accepts."""
        subprocess.run(
            _as_server_user([*self._pg_ctl(), "-o", self._options(), "-w", "-t", "60", "start"]),
            check=True,
            capture_output=True,
            timeout=90,
        )

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def running(self) -> bool:
        """Whether the server runs (``pg_ctl status``)."""
        status = subprocess.run(
            _as_server_user([*self._pg_ctl(), "status"]),
            check=False,
            capture_output=True,
            timeout=30,
        )
        return status.returncode == 0

    def _pg_ctl(self) -> list[str]:
        if self.root is None or self.binaries is None:
            raise RuntimeError("this cluster was not started by running_cluster")
        return _pg_ctl(self.binaries, self.root)

    def _options(self) -> str:
        assert self.root is not None
        return _server_options(self.root, self.port)

    @contextlib.contextmanager
    def fresh_database(self, template: str | None = None) -> Iterator[str]:
        """The URL of a new database, dropped afterwards: empty, or a copy of ``template``."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        admin = create_engine(self.url(), isolation_level="AUTOCOMMIT")
        copy = f' TEMPLATE "{template}"' if template else ""
        try:
            with admin.connect() as connection:
                connection.execute(text(f'CREATE DATABASE "{name}"{copy}'))
            yield self.url(name)
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        finally:
            admin.dispose()


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", _RUN_AS, "--", *command]


def _server_options(root: Path, port: int) -> str:
    return f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off"


def _pg_ctl(binaries: Path, root: Path) -> list[str]:
    return [str(binaries / "pg_ctl"), "-D", str(root / "data"), "-l", str(root / "server.log")]


@contextlib.contextmanager
def running_cluster(root: Path) -> Iterator[Cluster]:
    """Start a cluster under ``root`` (trust auth on loopback only); stop it on exit."""
    binaries = server_bin()
    if binaries is None:
        raise FileNotFoundError("Debian's postgresql package is not installed")
    data = root / "data"
    data.mkdir(parents=True)
    if os.geteuid() == 0:
        shutil.chown(root, _RUN_AS)
        shutil.chown(data, _RUN_AS)
    port = free_port()
    initdb = [str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust"]
    subprocess.run(_as_server_user([*initdb, "--no-sync"]), check=True, capture_output=True)
    options = _server_options(root, port)
    pg_ctl = _pg_ctl(binaries, root)
    subprocess.run(
        _as_server_user([*pg_ctl, "-o", options, "-w", "-t", "60", "start"]),
        check=True,
        capture_output=True,
    )
    try:
        yield Cluster(port, root, binaries)
    finally:
        subprocess.run(
            _as_server_user([*pg_ctl, "-m", "immediate", "-w", "stop"]),
            check=False,
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)
