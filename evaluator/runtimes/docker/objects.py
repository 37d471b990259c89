"""Listing and removing engine objects when others may remove the same ones concurrently.

Listing uses the low-level API, which returns the engine's list as it is: docker-py's
``containers.list()`` inspects every listed container and raises ``NotFound`` when one
disappears in between, which on an engine several workers reap happens all the time.
Removal treats "already gone" (404) and "removal already in progress" (409) as done.
"""

from __future__ import annotations

import contextlib
import re
import time
from datetime import datetime
from typing import Any

import docker
from docker.errors import APIError

Listing = list[dict[str, Any]]


def list_containers(client: docker.DockerClient, labels: list[str]) -> Listing:
    """Every container (any state) carrying all ``labels``, without inspecting each one."""
    return list(client.api.containers(all=True, filters={"label": labels}))


def list_networks(client: docker.DockerClient, labels: list[str]) -> Listing:
    """Every network carrying all ``labels``."""
    return list(client.api.networks(filters={"label": labels}))


def list_volumes(client: docker.DockerClient, labels: list[str]) -> Listing:
    """Every volume carrying all ``labels``."""
    return list(client.api.volumes(filters={"label": labels}).get("Volumes") or [])


def gone_or_going(exc: APIError) -> bool:
    """Whether an error only says that someone else removed (or is removing) the object."""
    if exc.status_code == 404:
        return True
    return exc.status_code == 409 and "in progress" in str(exc).lower()


def remove_container(client: docker.DockerClient, container_id: str | None) -> bool:
    """Force-remove a container and its anonymous volumes; True when the engine says this
    call removed it (it may say so to two racing calls: a removal that finds the container
    deregistered since its lookup answers success)."""
    if not container_id:
        return False
    try:
        client.api.remove_container(container_id, force=True, v=True)
        return True
    except APIError as exc:
        if gone_or_going(exc):
            return False
        raise


def remove_network(client: docker.DockerClient, network_id: str | None, tries: int = 20) -> bool:
    """Remove a network; True if this call removed it. Retries briefly while endpoints of
    containers being removed detach, then raises."""
    if not network_id:
        return False
    for attempt in range(tries):
        try:
            client.api.remove_network(network_id)
            return True
        except APIError as exc:
            if gone_or_going(exc):
                return False
            if attempt == tries - 1:
                raise
            time.sleep(0.1)
    return False


def evict_endpoints(client: docker.DockerClient, network_id: str) -> None:
    """Force-disconnect whatever is still attached to a network (e.g. a worker's container
    that never detached), so the network can be removed."""
    try:
        attached = client.api.inspect_network(network_id).get("Containers") or {}
    except APIError as exc:
        if gone_or_going(exc):
            return
        raise
    for container_id in attached:
        with contextlib.suppress(APIError):  # gone meanwhile, or already detached
            client.api.disconnect_container_from_network(container_id, network_id, force=True)


def remove_volume(client: docker.DockerClient, name: str) -> bool:
    """Remove a volume; True if this call removed it."""
    try:
        client.api.remove_volume(name, force=True)
        return True
    except APIError as exc:
        if gone_or_going(exc):
            return False
        raise


_FRACTION = re.compile(r"(\.\d{6})\d+")


def created_at(value: object) -> float | None:
    """An object's creation time as epoch seconds (containers give an int, networks and
    volumes an RFC 3339 string with nanoseconds); None when unreadable."""
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str) or not value:
        return None
    text = _FRACTION.sub(r"\1", value.replace("Z", "+00:00"))
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None
