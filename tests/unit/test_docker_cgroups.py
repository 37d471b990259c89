"""Container memory, OOM kills and pids are read from the cgroup files, on v1 and on v2
hosts (no engine needed: a fake cgroup tree)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evaluator.runtimes.docker import cgroups
from evaluator.runtimes.docker.cgroups import ContainerCgroup, ResourceMeter

CID = "0123abcd"


def client_with_stats(reply: dict[str, Any] | None = None) -> Any:
    """A stand-in Docker client whose stats API answers ``reply`` (None: must not be asked)."""

    def stats(container_id: str, stream: bool) -> dict[str, Any]:
        assert reply is not None, "the stats API was asked although cgroup files exist"
        assert (container_id, stream) == (CID, False)
        return reply

    return SimpleNamespace(api=SimpleNamespace(stats=stats))


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", tmp_path)
    return tmp_path


def write(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def test_cgroup_v1_cgroupfs_driver(root: Path) -> None:
    write(
        root / "memory" / "docker" / CID,
        {
            "memory.usage_in_bytes": "5000\n",
            "memory.stat": "cache 10\ntotal_inactive_file 1000\n",
            "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        },
    )
    write(root / "pids" / "docker" / CID, {"pids.current": "7\n"})
    meter = ResourceMeter(client_with_stats())
    sample = meter.sample(CID)
    assert sample is not None and sample.rss_bytes == 4000
    assert ContainerCgroup(CID).oom_kills() == 2
    assert (meter.peak_bytes, meter.peak_pids) == (4000, 7)


def test_cgroup_v2_systemd_driver(root: Path) -> None:
    write(
        root / "system.slice" / f"docker-{CID}.scope",
        {
            "memory.current": "5000\n",
            "memory.stat": "anon 3000\ninactive_file 1500\n",
            "memory.events": "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n",
            "pids.current": "3\n",
            "pids.peak": "9\n",
            "pids.events": "max 2\n",
        },
    )
    meter = ResourceMeter(client_with_stats())
    sample = meter.sample(CID)
    assert sample is not None and sample.rss_bytes == 3500
    cgroup = ContainerCgroup(CID)
    assert cgroup.oom_kills() == 1
    assert (cgroup.pids_limit_hits(), cgroup.pids_high_water()) == (2, 9)
    assert meter.peak_pids == 3


def test_no_container_has_no_files(root: Path) -> None:
    cgroup = ContainerCgroup(None)
    assert cgroup.path("memory", "memory.usage_in_bytes") is None
    assert (cgroup.oom_kills(), cgroup.pids_high_water()) == (0, 0)
    assert ResourceMeter(client_with_stats()).sample(None) is None


def test_other_layouts_fall_back_to_the_stats_api(root: Path) -> None:
    reply = {"memory_stats": {"usage": 5000, "stats": {"inactive_file": 1200}}}
    meter = ResourceMeter(client_with_stats(reply))
    sample = meter.sample(CID)
    assert sample is not None and sample.rss_bytes == 3800
    assert (meter.peak_bytes, meter.peak_pids) == (3800, 0)


def test_an_unreadable_usage_file_is_no_sample(root: Path) -> None:
    write(root / "memory" / "docker" / CID, {"memory.usage_in_bytes": "garbage\n"})
    meter = ResourceMeter(client_with_stats())
    assert meter.sample(CID) is None
    assert meter.peak_bytes == 0
