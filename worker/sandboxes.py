"""Removing the sandboxes of workers that died, on the Docker engine this worker uses.

A worker killed with SIGKILL, or a host that vanished, leaves its model container, guard
and network behind. Their labels name the job lease they ran under; once the store says
that lease no longer holds its job, any live worker on the engine removes them. Sandboxes
of leases the store never granted (another deployment on the same engine) are left alone.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

from configs.vocabulary.clock import Clock
from store.jobs import JobStore

log = logging.getLogger(__name__)

REAP_EVERY_S = 60.0  # a pass lists the engine's objects: cheap, but not per heartbeat


class SandboxReaper:
    """Runs a reaper pass at most every ``every_s`` seconds of ``clock``, from any thread."""

    def __init__(
        self,
        store: JobStore,
        clock: Clock,
        worker_id: str,
        every_s: float = REAP_EVERY_S,
        min_age_s: float = 60.0,
        owner: str | None = None,
    ) -> None:
        """``min_age_s``: younger runs are not judged (one being created has no guard yet).
        ``owner``: only sandboxes with this owner label (as ``DockerRuntime``'s
        ``label_owner``) are judged; None: every sandbox on the engine."""
        self.store, self.clock, self.worker_id = store, clock, worker_id
        self.every, self.min_age_s = timedelta(seconds=every_s), min_age_s
        self.owner = owner
        self._last: datetime | None = None
        self._lock = threading.Lock()

    def maybe_reap(self, *, force: bool = False) -> int:
        """Remove orphaned sandboxes if a pass is due (or ``force``); how many objects went."""
        now = self.clock.now()
        with self._lock:  # the heartbeat thread and the loop may both ask
            if not force and self._last is not None and now - self._last < self.every:
                return 0
            self._last = now
        try:
            from evaluator.runtimes.docker.reaper import reap_orphans

            removed = reap_orphans(
                lambda lease: not self.store.lease_dead(lease),
                min_age_s=self.min_age_s,
                owner=self.owner,
            )
        except Exception as exc:  # no engine, or the store is away: try at the next pass
            log.debug("no sandbox reaping: %s", exc, extra={"worker_id": self.worker_id})
            return 0
        if removed:
            log.info(
                "removed %d objects of sandboxes whose worker died",
                removed,
                extra={"worker_id": self.worker_id},
            )
        return removed
