"""The ``process`` runtime: a trusted local command serving the protocol on ``$PORT``.

For the embedded quick start and local development; no sandbox (use ``docker`` for
untrusted submissions). Memory is the RSS of the whole process tree, via psutil.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil

from configs.schema import Limits
from configs.vocabulary.failures import FailureCode
from evaluator.runtimes.runtime import (
    ExitReason,
    ResourceSample,
    Runtime,
    RuntimeConditions,
    RuntimeInfo,
    cpu_list,
)
from evaluator.transport.dialects import DEFAULT_DIALECT, get_dialect
from evaluator.transport.endpoint import Endpoint

_TREE_REFRESH_S = 1.0


_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _die_with(parent: int) -> Callable[[], None]:
    """For the child, before exec: SIGKILL it when the thread that started it dies, so a
    worker killed with ``kill -9`` mid-job leaves no model process behind. Prepared in the
    parent (the libc handle, the parent's pid) so the child only makes system calls."""

    def in_child() -> None:
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        # A parent that died between the fork and the prctl sent no signal and never will:
        # the child has been re-parented, so it must not live on as an orphan.
        if os.getppid() != parent:
            os._exit(1)

    return in_child


def free_port() -> int:
    """A TCP port on loopback nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ProcessRuntime(Runtime):
    """Start ``command`` in its own process group with ``PORT`` set; kill the group on stop."""

    kind = "process"

    def __init__(
        self,
        command: str | Sequence[str],
        *,
        limits: Limits | None = None,
        protocol: str = DEFAULT_DIALECT,
        cwd: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.command = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.command:
            raise ValueError("empty command")
        self.limits = limits or Limits()
        self.dialect = get_dialect(protocol)
        self.cwd = cwd
        self.extra_env = dict(env or {})
        self._proc: subprocess.Popen[bytes] | None = None
        # The log outlives stop() so the failure report can quote it; closed with the runtime.
        self._log = tempfile.TemporaryFile(prefix="dynaeval-model-log-")  # noqa: SIM115
        weakref.finalize(self, self._log.close)
        self.port: int | None = None
        self._tree: list[psutil.Process] = []
        self._tree_read_at = -_TREE_REFRESH_S
        self._stopped = False

    def start(self) -> Endpoint:
        self.port = free_port()
        self._stopped = False
        env = {**os.environ, **self.extra_env, "PORT": str(self.port), "PYTHONUNBUFFERED": "1"}
        self._proc = subprocess.Popen(  # noqa: S603 - the command is the trusted local model
            self.command,
            cwd=self.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with(os.getpid()),  # prepared system calls: safe beside threads
        )
        return Endpoint("127.0.0.1", self.port, self.dialect)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_reason(self) -> ExitReason | None:
        if self._proc is None or self._proc.poll() is None:
            return None
        code = self._proc.returncode
        if code < 0:
            signal_name = signal.Signals(-code).name
            return ExitReason(FailureCode.CRASHED, f"the model was killed by signal {signal_name}")
        return ExitReason(FailureCode.CRASHED, f"the model exited with code {code}")

    def sample_resources(self) -> ResourceSample | None:
        if not self.alive():
            return None
        processes = self._process_tree()
        if not processes:
            return None
        total = 0
        for process in processes:
            try:
                total += process.memory_info().rss
            except psutil.Error:
                continue
        return ResourceSample(total)

    def _process_tree(self) -> list[psutil.Process]:
        """The model's process and its descendants. Finding descendants scans every process
        on the machine, so the tree is re-read at most every second: sampling every 50 ms
        must not steal measurable CPU from the evaluation it measures."""
        now = time.monotonic()
        if now - self._tree_read_at >= _TREE_REFRESH_S:
            try:
                root = psutil.Process(self._proc.pid)  # type: ignore[union-attr]
                self._tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                self._tree = []
            self._tree_read_at = now
        return self._tree

    def logs_tail(self, max_bytes: int = 8192) -> str:
        if self._log.closed:
            return ""
        size = self._log.seek(0, os.SEEK_END)
        self._log.seek(max(0, size - max_bytes))
        return self._log.read().decode("utf-8", "replace")

    def stop(self) -> None:
        proc = self._proc
        if proc is None or self._stopped:
            return
        self._stopped = True
        if proc.poll() is not None:  # the leader died: its children may still run in the group
            self._reap_group(proc.pid)
            return
        for sig, wait_s in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        self._reap_group(proc.pid)

    @staticmethod
    def _reap_group(pgid: int) -> None:
        """Children that left the group's leader behind are killed too."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)

    def info(self) -> RuntimeInfo:
        return RuntimeInfo(
            self.kind,
            {"command": self.command, "cwd": str(Path(self.cwd)) if self.cwd else None},
        )

    def conditions(self) -> RuntimeConditions:
        """No limits are applied and no CPUs set apart: the model may use every CPU the
        worker may (the cpuset recorded), beside the evaluator."""
        return RuntimeConditions(local=True, cpuset=cpu_list(_affinity(self._proc)))


def _affinity(proc: subprocess.Popen[bytes] | None) -> set[int]:
    """The CPUs the model (else this process) may run on."""
    if not hasattr(os, "sched_getaffinity"):
        return set(range(os.cpu_count() or 1))
    with contextlib.suppress(OSError):
        if proc is not None and proc.poll() is None:
            return os.sched_getaffinity(proc.pid)
    return os.sched_getaffinity(os.getpid())
