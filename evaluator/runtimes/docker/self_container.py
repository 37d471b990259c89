"""An evaluator that itself runs in a container joins each run's internal network.

The evaluator talks to the guard's IP on the run's internal network. From the host that
works (the host has an address on every bridge); from a container it does not, because
the container is on other networks only. So when the evaluator runs in a container, that
container is connected to the run's network before the first request and disconnected
when the run ends.

Which container we are: ``DYNAEVAL_SELF_CONTAINER`` (an id or name, set by the
deployment) wins; otherwise, inside a Docker container (``/.dockerenv`` exists), the
container id in ``/proc/self/mountinfo`` (Docker bind-mounts ``/etc/hostname`` from
``.../containers/<id>/``), in ``/proc/self/cgroup`` (cgroup v1), and the hostname (Docker's
default is the id's first 12 characters) are candidates, and a candidate counts only if
the engine knows it and its hostname is ours. Nothing found means: not in a container.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError

from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.runtimes.docker.objects import gone_or_going

ENV = "DYNAEVAL_SELF_CONTAINER"
_MOUNT_ID = re.compile(r"/containers/([0-9a-f]{64})/(?:hostname|hosts|resolv\.conf)$")
_CGROUP_ID = re.compile(r"(?:/docker/|docker-)([0-9a-f]{64})(?:\.scope)?$")


def ids_in_mountinfo(text: str) -> list[str]:
    """Container ids of the bind mounts Docker makes for /etc/hostname, hosts, resolv.conf."""
    found = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] in ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf"):
            match = _MOUNT_ID.search(fields[3])
            if match:
                found.append(match.group(1))
    return found


def ids_in_cgroup(text: str) -> list[str]:
    """Container ids in a cgroup v1 membership list (``/docker/<id>``, ``docker-<id>.scope``)."""
    found = []
    for line in text.splitlines():
        match = _CGROUP_ID.search(line.rsplit(":", 1)[-1])
        if match:
            found.append(match.group(1))
    return found


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def candidates(root: str = "/") -> list[str]:
    """Ids (or names) this process may be running in, strongest evidence first, unverified."""
    if not Path(root, ".dockerenv").exists():
        return []
    found = ids_in_mountinfo(_read("/proc/self/mountinfo"))
    found += ids_in_cgroup(_read("/proc/self/cgroup"))
    found.append(socket.gethostname())
    return list(dict.fromkeys(found))  # unique, order kept


def _inspect(client: docker.DockerClient, ref: str) -> dict[str, Any] | None:
    try:
        return dict(client.api.inspect_container(ref))
    except APIError as exc:
        if exc.status_code == 404:
            return None
        raise


def verified(client: docker.DockerClient, refs: Iterable[str], hostname: str) -> str | None:
    """The id of the first running container among ``refs`` whose hostname is ``hostname``."""
    for ref in refs:
        attrs = _inspect(client, ref)
        if not attrs or not attrs["State"].get("Running"):
            continue
        if attrs["Config"].get("Hostname") == hostname:
            return str(attrs["Id"])
    return None


def self_container(client: docker.DockerClient) -> str | None:
    """The id of the container this process runs in, or None on the host."""
    named = os.environ.get(ENV, "").strip()
    if named:
        attrs = _inspect(client, named)
        if attrs is None:
            raise EvaluationError(
                FailureCode.PLATFORM_ERROR, f"{ENV}={named!r} names no container on this engine"
            )
        return str(attrs["Id"])
    return verified(client, candidates(), socket.gethostname())


def _namespace_owner(client: docker.DockerClient, container_id: str) -> str | None:
    """The container owning ``container_id``'s network namespace; None for host networking
    (the host already reaches every bridge)."""
    for _ in range(8):  # network_mode=container:<x> chains are short; never loop forever
        attrs = _inspect(client, container_id)
        mode = str((attrs or {}).get("HostConfig", {}).get("NetworkMode", ""))
        if mode == "host":
            return None
        if not mode.startswith("container:"):
            return container_id
        container_id = mode.removeprefix("container:")
    return container_id


def attach(client: docker.DockerClient, network_id: str) -> str | None:
    """Connect this process's container (if any) to a run's network; returns what to
    ``detach`` later, or None when nothing was connected."""
    mine = self_container(client)
    if mine is None:
        return None
    owner = _namespace_owner(client, mine)
    if owner is None:
        return None
    try:
        client.api.connect_container_to_network(owner, network_id)
    except APIError as exc:
        if "already exists" not in str(exc).lower():
            raise EvaluationError(
                FailureCode.PLATFORM_ERROR, f"could not join the run's network: {exc}"
            ) from None
    return owner


def detach(client: docker.DockerClient, container_id: str | None, network_id: str | None) -> None:
    """Disconnect a container from a run's network; already gone or detached is fine."""
    if not container_id or not network_id:
        return
    try:
        client.api.disconnect_container_from_network(container_id, network_id, force=True)
    except APIError as exc:
        if gone_or_going(exc) or "is not connected" in str(exc).lower():
            return
        raise
