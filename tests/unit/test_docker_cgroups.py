"""Container memory and OOM kills are read from the cgroup files, on v1 and on v2 hosts
(no engine needed: a fake cgroup tree)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.runtimes.docker import runtime as docker_runtime
from evaluator.runtimes.docker.runtime import DockerRuntime

CID = "0123abcd"


def runtime_reading(root: Path, monkeypatch: pytest.MonkeyPatch) -> DockerRuntime:
    monkeypatch.setattr(docker_runtime, "CGROUP_ROOT", root)
    runtime = DockerRuntime.__new__(DockerRuntime)  # no engine: only the cgroup readers
    runtime.container_id, runtime._peak_pids, runtime._peak_bytes = CID, 0, 0
    return runtime


def write(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def test_cgroup_v1_cgroupfs_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(
        tmp_path / "memory" / "docker" / CID,
        {
            "memory.usage_in_bytes": "5000\n",
            "memory.stat": "cache 10\ntotal_inactive_file 1000\n",
            "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        },
    )
    write(tmp_path / "pids" / "docker" / CID, {"pids.current": "7\n"})
    runtime = runtime_reading(tmp_path, monkeypatch)
    assert runtime.sample_resources().rss_bytes == 4000
    assert runtime._cgroup_int("memory", "memory.oom_control", "oom_kill") == 2
    assert runtime._peak_pids == 7


def test_cgroup_v2_systemd_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(
        tmp_path / "system.slice" / f"docker-{CID}.scope",
        {
            "memory.current": "5000\n",
            "memory.stat": "anon 3000\ninactive_file 1500\n",
            "memory.events": "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n",
            "pids.current": "3\n",
        },
    )
    runtime = runtime_reading(tmp_path, monkeypatch)
    assert runtime.sample_resources().rss_bytes == 3500
    assert runtime._cgroup_int("memory", "memory.oom_control", "oom_kill") == 1
    assert runtime._peak_pids == 3
