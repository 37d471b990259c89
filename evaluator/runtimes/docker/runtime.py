"""The ``docker`` runtime: one untrusted model container in a sandbox.

Per run: an internal network, a guard container owning a locked network namespace (see
``evaluator.runtimes.docker.sandbox``) and the model container joined to it with memory (swap off),
CPU and pids limits, a read-only root with a size-capped ``/tmp`` tmpfs, uid/gid 10001
whatever the image says (images built to run as root run as 10001 too), no capabilities,
no-new-privileges, and a size-capped json-file log. The evaluator reaches the model at the
guard's IP on the internal network (an evaluator that runs in a container joins that
network for the run, see ``self_container``); nothing is published on the host. ``stop()``
removes both containers and the network, always; a hard-stop timer does it if nobody calls
``stop()``, and if the whole process dies the guard ends after ``guard_lifetime_s`` and takes
the model with it (they share a PID namespace); the ``reaper`` removes what stopped.
Every object carries the job lease it belongs to (``lease``), for the reaper.
With ``remove_image_on_stop`` it then removes the image too (one the job itself loaded or
pulled), unless another tag or a container still uses it.

The cgroup readings and memory sampling live in ``cgroups``, the exit diagnosis in ``exits``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, DockerException, NotFound
from docker.models.networks import Network
from docker.types import DeviceRequest, Ulimit

from configs.schema import Limits
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.runtimes.docker import exits, objects, sandbox, self_container
from evaluator.runtimes.docker.cgroups import ContainerCgroup, ResourceMeter, memory_limit_bytes
from evaluator.runtimes.docker.engine_faults import classify
from evaluator.runtimes.docker.images import ImageRef, check_size, image_ref, release
from evaluator.runtimes.runtime import (
    ExitReason,
    ResourceSample,
    Runtime,
    RuntimeConditions,
    RuntimeInfo,
    cpu_list,
    split_cpus,
)
from evaluator.transport.dialects import DEFAULT_DIALECT, get_dialect
from evaluator.transport.endpoint import Endpoint


class DockerRuntime(Runtime):
    """Run ``image`` (an image ID or a local tag) in the sandbox, speaking ``protocol``.

    ``remove_image_on_stop``: after the run, remove the image and ``own_tags`` (the tags the
    job's own load created); only for images that were not in the engine before the job.
    ``lease``: the job lease owning this run (labelled on every object, see ``reaper``).
    ``guard_lifetime_s``: when the sandbox ends by itself (default: the hard-stop timeout
    plus a margin, so a live owner always stops it first).
    ``host_cpus``: the CPUs to share between model and evaluator (default: this process's
    affinity; the engine is on this host). With more than one, the model gets its own
    cpuset (``split_cpus``) and the evaluator's measuring threads keep to the rest.
    """

    kind = "docker"

    def __init__(
        self,
        image: str,
        limits: Limits,
        protocol: str = DEFAULT_DIALECT,
        *,
        client: docker.DockerClient | None = None,
        label_owner: str = "dynaeval",
        env: dict[str, str] | None = None,
        guard_image: str = sandbox.GUARD_IMAGE,
        hard_timeout_s: float | None = None,
        remove_image_on_stop: bool = False,
        own_tags: Iterable[str] = (),
        lease: str | None = None,
        guard_lifetime_s: float | None = None,
        host_cpus: Collection[int] | None = None,
        guard_keepalive_s: float = sandbox.GUARD_KEEPALIVE_S,
    ) -> None:
        self.image = image
        self.limits = limits
        self.dialect = get_dialect(protocol)
        self.port = self.dialect.default_port
        self.client = client or docker.from_env()
        self.owner = label_owner
        self.env = dict(env or {})
        self.guard_image = guard_image
        self.hard_timeout_s = hard_timeout_s or limits.startup_s + limits.total_s + 60.0
        self.guard_lifetime_s = guard_lifetime_s or self.hard_timeout_s + sandbox.GUARD_MARGIN_S
        self.guard_keepalive_s = guard_keepalive_s
        self._stopping = threading.Event()  # ends the guard's keep-alive pings
        self.lease = lease
        self.run_id = sandbox.new_run_id()
        self.ref: ImageRef | None = None
        self.network_id: str | None = None
        self.guard_id: str | None = None
        self.container_id: str | None = None
        self.host: str | None = None
        self.joined_id: str | None = None  # our own container, joined to the run's network
        self._lock = threading.RLock()
        self._hard_stop_timer: threading.Timer | None = None
        self._final_logs: str | None = None
        self._final_state: dict[str, Any] | None = None
        self._meter = ResourceMeter(self.client)
        self._hard_stopped = False
        self._started_at: float | None = None  # the engine's clock: events are read since then
        self.remove_image_on_stop = remove_image_on_stop
        self.own_tags = tuple(own_tags)
        self.image_removed: bool | None = None  # set by stop() when removal was asked for
        self.gpu_devices: tuple[str, ...] = ()  # GPUs passed in by id (grant_gpus)
        self.host_cpus = frozenset(host_cpus if host_cpus is not None else _own_cpus())
        self.cpu_split = split_cpus(self.host_cpus, limits.cpus)

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> Endpoint:
        """Create network, guard and model container; return the model's address."""
        with self._lock:
            if self.container_id is not None:
                raise RuntimeError("this runtime was already started")
            self.ref = self._present_image()
            check_size(self.ref, self.limits, self.client)
            self._started_at = time.time()
            self._arm_hard_stop_timer()
            try:
                network = self._network()
                self.network_id = network.id
                guard = sandbox.start_guard(
                    self.client,
                    network.name,
                    self.owner,
                    self.run_id,
                    self.guard_image,
                    lifetime_s=self.guard_lifetime_s,
                    lease=self.lease,
                    keepalive_s=self.guard_keepalive_s,
                )
                self.guard_id = guard.id
                self._start_keepalive(guard.id)
                self.host = sandbox.guard_ip(guard, network.name)
                self.joined_id = self_container.attach(self.client, network.id)
                container = self.client.containers.run(self.ref.image_id, **self._run_kwargs())
                self.container_id = container.id
            except EvaluationError:
                self.stop()
                raise
            except (APIError, DockerException) as exc:
                self.stop()
                raise classify(exc, FailureCode.START_FAILED, "starting the model") from None
            return Endpoint(self.host, self.port, self.dialect)

    def _present_image(self) -> ImageRef:
        """The image, which another job may have removed since this one acquired it: that is
        the platform's race, retried (the next attempt loads or pulls it again)."""
        try:
            return image_ref(self.image, self.client)
        except EvaluationError as exc:
            raise EvaluationError(
                FailureCode.PLATFORM_ERROR,
                f"the image left this worker before the model started ({exc.message})",
            ) from None

    def _network(self) -> Network:
        """The run's internal network; failing to make one is the platform's fault."""
        try:
            return sandbox.create_network(self.client, self.owner, self.run_id, self.lease)
        except (APIError, DockerException) as exc:
            raise EvaluationError(
                FailureCode.PLATFORM_ERROR, f"could not create the run's network: {exc}"
            ) from None

    def _run_kwargs(self) -> dict[str, Any]:
        limits = self.limits
        memory = memory_limit_bytes(limits)
        log_size = max(64 * 1024, limits.max_log_bytes)
        return {
            "name": f"dynaeval-{self.run_id}-model",
            "detach": True,
            "network_mode": f"container:{self.guard_id}",
            # The guard is PID 1 of the model's PID namespace: when it ends, the model ends.
            "pid_mode": f"container:{self.guard_id}",
            "user": sandbox.SANDBOX_USER,
            "environment": {
                **self.env,
                "PORT": str(self.port),
                "HOME": "/tmp",
                "TMPDIR": "/tmp",
            },
            "mem_limit": memory,
            "memswap_limit": memory,
            "mem_swappiness": 0,
            "nano_cpus": int(limits.cpus * 1e9),
            **({"cpuset_cpus": cpu_list(self.cpu_split[0])} if self.cpu_split else {}),
            "pids_limit": limits.pids,
            "read_only": True,
            "tmpfs": {"/tmp": f"size={limits.tmpfs_mib}m,mode=1777,nosuid,nodev"},
            "shm_size": f"{max(1, limits.tmpfs_mib)}m",
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "ulimits": [Ulimit(name="core", soft=0, hard=0)],
            "labels": sandbox.labels(self.owner, self.run_id, "model", self.lease),
            "log_config": {
                "type": "json-file",
                "config": {"max-size": str(log_size), "max-file": "2"},
            },
            **(
                {
                    "device_requests": [
                        DeviceRequest(device_ids=list(self.gpu_devices), capabilities=[["gpu"]])
                    ]
                }
                if self.gpu_devices
                else {}
            ),
        }

    def grant_gpus(self, devices: Sequence[str]) -> None:
        # by id, never by count: a count takes the machine's first GPUs, which another
        # worker's job on the same machine may be using
        self.gpu_devices = tuple(devices)

    def _start_keepalive(self, guard_id: str) -> None:
        """Ping the guard while this runtime runs: if this process dies, the pings stop and
        the guard ends the sandbox within ``guard_keepalive_s``."""
        if self.guard_keepalive_s <= 0:
            return
        every = min(sandbox.KEEPALIVE_PING_S, self.guard_keepalive_s / 3)

        def ping() -> None:
            while not self._stopping.is_set():
                sandbox.keep_alive(self.client, guard_id)
                self._stopping.wait(every)

        threading.Thread(target=ping, name=f"guard-keepalive-{self.run_id}", daemon=True).start()

    def _stop_keepalive(self) -> None:
        self._stopping.set()

    def _arm_hard_stop_timer(self) -> None:
        """Remove the sandbox after ``hard_timeout_s`` even if nobody calls ``stop()``."""
        self._hard_stop_timer = threading.Timer(self.hard_timeout_s, self._hard_stop)
        self._hard_stop_timer.daemon = True
        self._hard_stop_timer.start()

    def _hard_stop(self) -> None:
        self._hard_stopped = True
        self.stop()

    def stop(self) -> None:
        """Keep the log tail and exit state, then remove model, guard and network. Idempotent."""
        self._stop_keepalive()
        with self._lock:
            if self._hard_stop_timer is not None:
                self._hard_stop_timer.cancel()
                self._hard_stop_timer = None
            if self.container_id is not None and self._final_logs is None:
                with contextlib.suppress(DockerException):
                    self._final_state = self._state()
                with contextlib.suppress(DockerException):
                    self._final_logs = self._read_logs(self.limits.max_log_bytes)
            errors: list[str] = []
            for remove, attr in (
                (objects.remove_container, "container_id"),
                (objects.remove_container, "guard_id"),
                (self._detach, "joined_id"),
                (objects.remove_network, "network_id"),
            ):
                try:
                    remove(self.client, getattr(self, attr))
                    setattr(self, attr, None)
                except DockerException as exc:
                    errors.append(f"{attr}: {exc}")
            if errors:
                raise RuntimeError("could not remove the sandbox: " + "; ".join(errors))
            if self.remove_image_on_stop and self.image_removed is None:
                image_id = self.ref.image_id if self.ref else self.image
                self.image_removed = release(image_id, self.own_tags, self.client)

    def _detach(self, client: docker.DockerClient, joined_id: str | None) -> None:
        self_container.detach(client, joined_id, self.network_id)

    # -- state ------------------------------------------------------------------------------
    def _state(self) -> dict[str, Any] | None:
        if self.container_id is None:
            return self._final_state
        try:
            state: dict[str, Any] = self.client.api.inspect_container(self.container_id)["State"]
            return state
        except NotFound:
            return self._final_state

    def _settled_state(self, wait_s: float = 1.0) -> dict[str, Any] | None:
        """The state, waiting briefly while the engine has not yet recorded a dead PID 1."""
        deadline = time.monotonic() + wait_s
        state = self._state()
        while state and state.get("Running") and time.monotonic() < deadline:
            pid = int(state.get("Pid") or 0)
            if not pid or Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.05)
            state = self._state()
        return state

    def alive(self) -> bool:
        if self.container_id is None:
            return False
        state = self._state()
        return bool(state and state.get("Running"))

    def exit_reason(self) -> ExitReason | None:
        """Why the model died or stopped answering: OOM, pids, disk, or its exit code."""
        if self._hard_stopped:
            return exits.hard_timeout(self.hard_timeout_s)
        if self._guard_exit_code() == sandbox.KEEPALIVE_EXPIRED:
            return exits.keepalive_expired(self.guard_keepalive_s)
        state = self._settled_state()
        if state is None:
            return None
        reason = exits.diagnose(
            state,
            self.limits,
            ContainerCgroup(self.container_id),
            self._meter,
            current_state=self._state,
            logs_tail=self.logs_tail,
        )
        if reason is None or (reason.code == FailureCode.OOM_KILLED and state.get("OOMKilled")):
            return reason
        killer = self._killed_from_outside()
        return exits.killed_from_outside(killer) if killer else reason

    def _guard_exit_code(self) -> int | None:
        """The guard's exit code once it has exited (None while it runs or is gone)."""
        if self.guard_id is None:
            return None
        try:
            state = self.client.api.inspect_container(self.guard_id)["State"]
        except DockerException:
            return None
        return None if state.get("Running") else int(state.get("ExitCode") or 0)

    def _killed_from_outside(self) -> str | None:
        """The signal someone outside the sandbox (``docker kill``, an operator, the host)
        sent the model or its guard during the run, per the engine's events; None when no
        such kill happened. We never kill a run's containers before stopping it."""
        ids = [i for i in (self.container_id, self.guard_id) if i]
        if not ids or self._started_at is None:
            return None
        try:
            found = self.client.api.events(
                since=int(self._started_at) - 1,
                until=int(time.time()) + 1,
                filters={"container": ids, "event": "kill"},
                decode=True,
            )
            for event in found:
                signal = str((event.get("Actor") or {}).get("Attributes", {}).get("signal", "?"))
                if signal not in ("10", sandbox.KEEPALIVE_SIGNAL):  # our keep-alive pings
                    return signal
        except DockerException:
            return None
        return None

    # -- measurement ------------------------------------------------------------------------
    def sample_resources(self) -> ResourceSample | None:
        """Memory of the container's cgroup minus page cache (cgroup files, else the API)."""
        return self._meter.sample(self.container_id)

    def logs_tail(self, max_bytes: int = 8192) -> str:
        """The last ``max_bytes`` (never more than ``limits.max_log_bytes``) of the log."""
        max_bytes = min(max_bytes, self.limits.max_log_bytes)
        if self.container_id is None:
            return (self._final_logs or "")[-max_bytes:] if max_bytes > 0 else ""
        try:
            return self._read_logs(max_bytes)
        except DockerException:
            return (self._final_logs or "")[-max_bytes:]

    def _read_logs(self, max_bytes: int) -> str:
        if max_bytes <= 0 or self.container_id is None:
            return ""
        lines = max(100, max_bytes // 40)
        raw: bytes = self.client.api.logs(self.container_id, stdout=True, stderr=True, tail=lines)
        return raw[-max_bytes:].decode("utf-8", "replace")

    # -- measurement conditions ---------------------------------------------------------------
    def evaluator_cpus(self) -> frozenset[int] | None:
        """The CPUs left to the evaluator when the model has its own (None on one CPU)."""
        return self.cpu_split[1] if self.cpu_split else None

    def conditions(self) -> RuntimeConditions:
        """The model's cpuset (its own, or every CPU when there is only one), CPU and memory
        limits, the evaluator's cpuset, the engine's version and its cgroup version."""
        engine, cgroup = _engine_facts(self.client)
        return RuntimeConditions(
            local=True,  # the engine is this host's (host_cpus and the cpuset assume so)
            cpuset=cpu_list(self.cpu_split[0] if self.cpu_split else self.host_cpus),
            cpu_limit=self.limits.cpus,
            memory_limit_bytes=memory_limit_bytes(self.limits),
            evaluator_cpuset=cpu_list(self.cpu_split[1]) if self.cpu_split else None,
            engine=engine,
            cgroup_version=cgroup,
        )

    def info(self) -> RuntimeInfo:
        """Image id/digest, limits applied, user, network mode (recorded with every result)."""
        ref = self.ref
        return RuntimeInfo(
            self.kind,
            {
                "image": self.image,
                "image_id": ref.image_id if ref else None,
                "digest": ref.digest if ref else None,
                "image_user": ref.user if ref else None,
                "user": sandbox.SANDBOX_USER,
                "protocol": self.dialect.name,
                "port": self.port,
                "network": "internal bridge + guard namespace (no egress)",
                "limits": {
                    "memory_bytes": memory_limit_bytes(self.limits),
                    "swap": "off",
                    "cpus": self.limits.cpus,
                    "cpuset_cpus": cpu_list(self.cpu_split[0]) if self.cpu_split else None,
                    "pids": self.limits.pids,
                    "tmpfs_mib": self.limits.tmpfs_mib,
                    "read_only_root": True,
                    "capabilities": [],
                    "no_new_privileges": True,
                },
                "run_id": self.run_id,
            },
        )


def _own_cpus() -> frozenset[int]:
    """The CPUs this process may use (its main thread's: a worker thread may be pinned)."""
    if hasattr(os, "sched_getaffinity"):
        return frozenset(os.sched_getaffinity(os.getpid()))
    return frozenset(range(os.cpu_count() or 1))


_FACTS: weakref.WeakKeyDictionary[docker.DockerClient, tuple[str | None, str | None]] = (
    weakref.WeakKeyDictionary()
)


def _engine_facts(client: docker.DockerClient) -> tuple[str | None, str | None]:
    """("docker <version>", cgroup version) of the engine; Nones when it does not say. Kept
    per client once known: both calls cost a round trip and neither changes while it runs."""
    known = _FACTS.get(client)
    if known is not None:
        return known
    try:
        version = client.version().get("Version")
        cgroup = client.info().get("CgroupVersion")
    except (APIError, DockerException, AttributeError):
        return None, None  # not kept: the next run asks again
    facts = (f"docker {version}" if version else None), (str(cgroup) if cgroup else None)
    with contextlib.suppress(TypeError):  # a client that cannot be weakly referenced
        _FACTS[client] = facts
    return facts
