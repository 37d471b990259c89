"""A model container's cgroup, read directly: memory, OOM kills and pids.

The files are read from the host's cgroup tree, v1 (one tree per controller) or v2 (one
unified tree), under the cgroupfs or the systemd driver. Reading them is fast; the engine's
stats API, the fallback for other layouts, takes a second or two per call.
"""

from __future__ import annotations

from pathlib import Path

import docker
from docker.errors import DockerException

from configs.schema import Limits
from evaluator.runtimes.runtime import ResourceSample

CGROUP_ROOT = Path("/sys/fs/cgroup")
# cgroup v2 names of the v1 files read here (the pids files are named alike in both)
_V2_NAMES = {
    "memory.usage_in_bytes": "memory.current",
    "memory.oom_control": "memory.events",
}
_V2_KEYS = {"total_inactive_file": "inactive_file", "total_mapped_file": "file_mapped"}


def memory_limit_bytes(limits: Limits) -> int:
    """The memory limit the container's cgroup gets (swap off), in bytes."""
    return int(limits.memory_gib * 1024**3)


class ContainerCgroup:
    """The cgroup files of the container ``container_id`` (None: no container, no files).

    Files are named by their v1 names; on a v2 host the unified file is read instead.
    """

    def __init__(self, container_id: str | None) -> None:
        self.container_id = container_id

    def path(self, controller: str, name: str) -> Path | None:
        """The file ``name`` of ``controller``, or None in another layout (callers then
        fall back to the API or to 0)."""
        if self.container_id is None:
            return None
        groups = ("docker/" + self.container_id, f"system.slice/docker-{self.container_id}.scope")
        unified = _V2_NAMES.get(name, name)
        for group in groups:
            for path in (CGROUP_ROOT / controller / group / name, CGROUP_ROOT / group / unified):
                if path.exists():
                    return path
        return None

    def read_int(self, controller: str, name: str, key: str | None = None) -> int:
        """The file's number, or the number after ``key`` in a ``key value`` file; 0 when
        the file or the key is missing or unreadable."""
        path = self.path(controller, name)
        if path is None:
            return 0
        if key is not None and not path.is_relative_to(CGROUP_ROOT / controller):
            key = _V2_KEYS.get(key, key)  # a unified (v2) file: its keys have v2 names
        try:
            text = path.read_text()
        except OSError:
            return 0
        if key is None:
            value = text.strip()
            return int(value) if value.isdigit() else 0
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
                return int(parts[1])
        return 0

    def oom_kills(self) -> int:
        """How many processes the kernel killed for exceeding the memory limit."""
        return self.read_int("memory", "memory.oom_control", "oom_kill")

    def pids_limit_hits(self) -> int:
        """How many forks the pids limit refused."""
        return self.read_int("pids", "pids.events", "max")

    def pids_current(self) -> int:
        """Processes and threads in the container now."""
        return self.read_int("pids", "pids.current")

    def pids_high_water(self) -> int:
        """The most processes and threads the kernel recorded (now, where it keeps no peak)."""
        return max(self.read_int("pids", "pids.peak"), self.pids_current())


class ResourceMeter:
    """Samples a container's memory, unmapped page cache excluded (``resident``), and keeps
    the peaks of memory and pids seen; the peaks outlive the container, for the exit
    diagnosis."""

    def __init__(self, client: docker.DockerClient) -> None:
        self.client = client
        self.peak_bytes = 0
        self.peak_pids = 0

    def sample(self, container_id: str | None) -> ResourceSample | None:
        """Memory from the cgroup files, else from the engine's stats API; None when neither
        can tell."""
        cgroup = ContainerCgroup(container_id)
        usage = cgroup.path("memory", "memory.usage_in_bytes")
        if usage is not None:
            try:
                total = int(usage.read_text())
            except (OSError, ValueError):
                return None
            inactive = cgroup.read_int("memory", "memory.stat", "total_inactive_file")
            mapped = cgroup.read_int("memory", "memory.stat", "total_mapped_file")
            rss = resident(total, inactive, mapped)
            self.peak_pids = max(self.peak_pids, cgroup.pids_current())
        else:
            api_rss = api_memory(self.client, container_id)
            if api_rss is None:
                return None
            rss = api_rss
        self.peak_bytes = max(self.peak_bytes, rss)
        return ResourceSample(rss)


def resident(usage: int, inactive_file: int, mapped_file: int) -> int:
    """The cgroup's usage minus page cache nobody maps: the inactive file list is dropped,
    but the mapped file pages it holds (the interpreter, shared libraries: the process's
    resident set counts them) are added back, up to the list's size. Without that a
    process measured ~3 % under its own VmRSS (examples/calibration, 300 MiB)."""
    return max(0, usage - inactive_file + min(mapped_file, inactive_file))


def api_memory(client: docker.DockerClient, container_id: str | None) -> int | None:
    """Memory as ``resident`` counts it, from the engine's (slow) stats API."""
    if container_id is None:
        return None
    try:
        stats = client.api.stats(container_id, stream=False)
    except DockerException:
        return None
    memory = stats.get("memory_stats") or {}
    if "usage" not in memory:
        return None
    detail = memory.get("stats") or {}
    cache = detail.get("total_inactive_file", detail.get("inactive_file", 0))
    mapped = detail.get("total_mapped_file", detail.get("file_mapped", 0))
    return resident(int(memory["usage"]), int(cache), int(mapped))
