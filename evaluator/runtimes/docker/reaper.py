"""Remove the sandboxes nobody owns any more, on an engine any number of workers share.

A run is an orphan when
- it carries a job lease (``dynaeval.lease``) that is no longer alive: its worker died or
  lost the job, so nobody will stop it (a worker that lost its lease must not keep
  evaluating anyway);
- it carries no lease (``dynaeval evaluate`` and other direct uses) and its guard is gone
  or not running: without the guard the model is dead too (shared PID namespace) and the
  run cannot be used. A lease-less run whose guard still runs is left alone, because
  nothing says its owner is dead; its guard ends by itself after its bounded lifetime.

Only runs whose oldest object is older than ``min_age_s`` are judged: a run being created
has a network before it has a guard, and its lease may not be visible yet.

Any number of reapers may race over the same orphans (and over objects their owners are
removing): every removal treats "already gone" and "removal in progress" as done, and a
network still busy is left for the next pass. The count returned is of the removals the
engine confirmed to this call (it may confirm one container to two racing calls).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import docker
from docker.errors import APIError

from evaluator.runtimes.docker import objects
from evaluator.runtimes.docker.sandbox import LEASE, MANAGED, OWNER, ROLE, RUN

log = logging.getLogger(__name__)


@dataclass
class _Run:
    """One run's objects as the engine listed them."""

    lease: str | None = None
    created: float = float("inf")  # oldest object's creation time
    guard_running: bool = False
    containers: list[tuple[str, str]] = field(default_factory=list)  # (role, id)
    networks: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)

    def saw(self, labels: dict[str, str] | None, created: object) -> None:
        labels = labels or {}
        self.lease = self.lease or labels.get(LEASE)
        stamp = objects.created_at(created)
        # Unreadable creation time: treat as new, so it is never judged too early.
        self.created = min(self.created, stamp if stamp is not None else time.time())


def _runs(client: docker.DockerClient, selector: list[str]) -> dict[str, _Run]:
    """Every managed object of the engine, grouped by run, without inspecting any."""
    runs: dict[str, _Run] = {}

    def run_of(labels: dict[str, str] | None) -> _Run:
        return runs.setdefault((labels or {}).get(RUN, ""), _Run())

    for item in objects.list_containers(client, selector):
        labels = item.get("Labels")
        run = run_of(labels)
        run.saw(labels, item.get("Created"))
        role = (labels or {}).get(ROLE, "")
        run.containers.append((role, item["Id"]))
        run.guard_running |= role == "guard" and item.get("State") == "running"
    for item in objects.list_networks(client, selector):
        run = run_of(item.get("Labels"))
        run.saw(item.get("Labels"), item.get("Created"))
        run.networks.append(item["Id"])
    for item in objects.list_volumes(client, selector):
        run = run_of(item.get("Labels"))
        run.saw(item.get("Labels"), item.get("CreatedAt"))
        run.volumes.append(item["Name"])
    return runs


def _orphaned(run: _Run, is_lease_alive: Callable[[str], bool], cutoff: float) -> bool:
    if run.created > cutoff:
        return False  # possibly still being created
    if run.lease is not None:
        return not is_lease_alive(run.lease)
    return not run.guard_running


def _remove_run(client: docker.DockerClient, run: _Run) -> int:
    """Remove a run's objects: the model before its guard, containers before networks."""
    order = {"model": 0, "guard": 1}
    removed = 0
    for _, container_id in sorted(run.containers, key=lambda c: order.get(c[0], 2)):
        removed += objects.remove_container(client, container_id)
    for network_id in run.networks:
        objects.evict_endpoints(client, network_id)
        try:
            removed += objects.remove_network(client, network_id, tries=10)
        except APIError as exc:  # still busy (another reaper mid-way): the next pass
            log.info("network %s not removed yet: %s", network_id[:12], exc)
    for name in run.volumes:
        removed += objects.remove_volume(client, name)
    return removed


def reap_orphans(
    is_lease_alive: Callable[[str], bool],
    client: docker.DockerClient | None = None,
    *,
    min_age_s: float = 60.0,
    owner: str | None = None,
) -> int:
    """Remove every container, network and volume of orphaned runs (see the module's
    docstring); returns how many removals the engine confirmed to this call (a reaper
    racing another may both be told of one container: a count for logs, not a census).
    ``owner`` limits the pass to one owner label (tests share an engine with others).
    ``is_lease_alive`` is asked once per lease per pass; if it raises, the pass stops and
    nothing more is removed."""
    client = client or docker.from_env()
    selector = [f"{MANAGED}=1"] + ([f"{OWNER}={owner}"] if owner is not None else [])
    verdicts: dict[str, bool] = {}

    def alive(lease: str) -> bool:
        if lease not in verdicts:
            verdicts[lease] = is_lease_alive(lease)
        return verdicts[lease]

    cutoff = time.time() - min_age_s
    removed = 0
    for run in _runs(client, selector).values():
        if _orphaned(run, alive, cutoff):
            removed += _remove_run(client, run)
    return removed
