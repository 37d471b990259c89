"""The Docker sandbox's network: an internal network plus a locked network namespace.

Why a guard container. On Docker 20.10 an ``internal=True`` bridge network still gives the
container a default route via the bridge's gateway, and that gateway is the host: a
container on it can connect to any host listener (also ones bound on other bridges' IPs,
since packets to a local address never traverse FORWARD, where Docker's isolation rules
live). It can also ask Docker's embedded DNS (127.0.0.11), which forwards to upstream
resolvers. So each run gets a *guard* container that owns the network namespace, like a
Kubernetes pause container:

1. it joins the run's internal network, deletes the default route, and installs
   iptables / ip6tables rules in its own namespace: OUTPUT is dropped except loopback and
   replies on connections someone else opened (conntrack ESTABLISHED/RELATED); 127.0.0.11
   (embedded DNS) is dropped too;
2. it then drops to uid 10002 with no capabilities and becomes a tiny init (PID 1) that
   reaps orphans and exits after a bounded lifetime;
3. only then is the model started with ``network_mode=container:<guard>``, so it never
   runs a single instruction before the rules are in place, and it has no
   CAP_NET_ADMIN to undo them.

Why a bounded lifetime. A worker that is killed (SIGKILL, OOM, host reboot of the worker's
container) cannot remove its sandbox, so the guard ends by itself after the run's whole
budget plus a margin. The model is started with ``pid_mode=container:<guard>``: the guard
is PID 1 of the shared PID namespace, and when PID 1 exits the kernel kills every process
in the namespace, so the model ends with it. The guard runs as a different uid than the
model (10002 vs 10001) so that the model, which can see it in ``/proc``, can neither
signal nor ptrace it (the kernel also ignores signals to a namespace's init from inside
unless it installed a handler). The stopped containers left behind are removed by any
live worker's ``reaper``.

The evaluator (on the host) connects to the guard's IP on the internal network: the SYN
comes in, the replies leave as ESTABLISHED. The model cannot open any connection at all.
``net.ipv4.ip_unprivileged_port_start=0`` is set on the namespace so a non-root model can
bind port 80 (Dynalab 2.0 images listen there).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable

import docker
from docker.errors import APIError, DockerException
from docker.models.containers import Container
from docker.models.networks import Network

from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.runtimes.docker import objects

MANAGED = "dynaeval.managed"
OWNER = "dynaeval.owner"
RUN = "dynaeval.run"
ROLE = "dynaeval.role"
LEASE = "dynaeval.lease"  # the job lease (claim token) a run belongs to, if any
GUARD_IMAGE = "dynaeval/python-base:latest"
READY_LINE = "dynaeval-guard-ready"
SANDBOX_UID = 10001
SANDBOX_USER = f"{SANDBOX_UID}:{SANDBOX_UID}"
GUARD_UID = 10002  # not the model's uid: the model must not be able to signal or ptrace it
GUARD_MARGIN_S = 30.0  # the guard outlives the runtime's hard-stop timer by this much

# The guard outlives its owner by at most this long: a live owner signals it (SIGUSR1,
# through the engine) every KEEPALIVE_PING_S, and a guard that hears nothing for
# GUARD_KEEPALIVE_S exits, ending the model. A killed worker's sandbox so stops within a
# minute and a half, not after the run's whole budget.
GUARD_KEEPALIVE_S = 90.0
KEEPALIVE_PING_S = 10.0
KEEPALIVE_SIGNAL = "SIGUSR1"
KEEPALIVE_EXPIRED = 75  # the guard's exit code when its owner stopped pinging it

# The guard's PID 1 after it dropped privileges: reap orphans of the shared PID namespace
# (they are reparented here) until the lifetime ($1 of the shell script) is over, or until
# no keep-alive came for the window ($3; 0: none expected). Only the engine can send it
# one: the model runs as another uid and cannot signal it.
_GUARD_INIT = """import os, signal, sys, time
hard_end = time.monotonic() + float(sys.argv[1])
window = float(sys.argv[2])
def deadline():
    return min(hard_end, time.monotonic() + window) if window > 0 else hard_end
end = deadline()
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
signal.signal(signal.SIGUSR1, lambda *_: None)
waited = {signal.SIGCHLD, signal.SIGUSR1}
signal.pthread_sigmask(signal.SIG_BLOCK, waited)
while (left := end - time.monotonic()) > 0:
    got = signal.sigtimedwait(waited, left)
    if got is not None and got.si_signo == signal.SIGUSR1:
        end = deadline()
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
sys.exit(75 if end < hard_end else 0)  # 75: no keep-alive came, the platform's doing
"""

# Runs as root with NET_ADMIN (+ SETUID/SETGID/SETPCAP to drop them), then runs the init
# capless. Arguments: $1 the lifetime in seconds, $2 the init's source, $3 the keep-alive
# window in seconds (0: none).
_GUARD_SCRIPT = f"""set -eu
ip route del default 2>/dev/null || true
ip -6 route del default 2>/dev/null || true
rules() {{
  $1 -P INPUT ACCEPT
  $1 -P FORWARD DROP
  $1 -A OUTPUT -o lo -j ACCEPT
  $1 -A OUTPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
  $1 -P OUTPUT DROP
}}
iptables -A OUTPUT -d 127.0.0.11 -j DROP
rules iptables
if ! rules ip6tables 2>/dev/null; then
  if grep -qv ' lo$' /proc/net/if_inet6 2>/dev/null; then
    echo "ip6tables failed although IPv6 addresses exist" >&2; exit 3
  fi
fi
echo {READY_LINE}
exec setpriv --reuid={GUARD_UID} --regid={GUARD_UID} --clear-groups \\
  --inh-caps=-all --bounding-set=-all python3 -I -S -c "$2" "$1" "$3"
"""


def new_run_id() -> str:
    """A short random id naming one run's network and containers."""
    return uuid.uuid4().hex[:12]


def labels(owner: str, run_id: str, role: str, lease: str | None = None) -> dict[str, str]:
    """Labels on every object a run creates (``cleanup_leftovers`` finds them by owner, the
    ``reaper`` by lease)."""
    found = {MANAGED: "1", OWNER: owner, RUN: run_id, ROLE: role}
    if lease is not None:
        found[LEASE] = lease
    return found


def create_network(
    client: docker.DockerClient, owner: str, run_id: str, lease: str | None = None
) -> Network:
    """An internal bridge network for one run (no outside route, no published ports)."""
    return client.networks.create(
        f"dynaeval-{run_id}",
        driver="bridge",
        internal=True,
        check_duplicate=True,
        labels=labels(owner, run_id, "network", lease),
    )


_PINNED: dict[str, str] = {}
_PIN_LOCK = threading.Lock()


def pinned_image(client: docker.DockerClient, name: str) -> str:
    """The image ID ``name`` had the first time this process asked. Guards start by ID, so an
    uploaded tarball that briefly carries the guard's tag while it loads can never become a
    guard (workers pin it on start, before any job runs)."""
    with _PIN_LOCK:
        if name not in _PINNED:
            try:
                _PINNED[name] = client.images.get(name).id
            except (APIError, DockerException) as exc:
                raise EvaluationError(
                    FailureCode.PLATFORM_ERROR, f"the guard image {name!r} is missing: {exc}"
                ) from None
        return _PINNED[name]


def pin_guard_image(client: docker.DockerClient | None = None) -> str:
    """Resolve the guard image to its ID for the rest of this process (call on worker start)."""
    return pinned_image(client or docker.from_env(), GUARD_IMAGE)


def start_guard(
    client: docker.DockerClient,
    network_name: str,
    owner: str,
    run_id: str,
    image: str = GUARD_IMAGE,
    timeout_s: float = 20.0,
    *,
    lifetime_s: float,
    lease: str | None = None,
    keepalive_s: float = 0.0,
) -> Container:
    """Start the namespace-owning guard, which exits after ``lifetime_s`` (or after
    ``keepalive_s`` without a :func:`keep_alive`, when not 0), and wait until its rules
    are in place."""
    try:
        guard = client.containers.run(
            pinned_image(client, image),
            [
                "/bin/sh",
                "-c",
                _GUARD_SCRIPT,
                "guard",
                str(float(lifetime_s)),
                _GUARD_INIT,
                str(float(keepalive_s)),
            ],
            name=f"dynaeval-{run_id}-guard",
            detach=True,
            network=network_name,
            user="0:0",
            cap_drop=["ALL"],
            cap_add=["NET_ADMIN", "SETUID", "SETGID", "SETPCAP"],
            security_opt=["no-new-privileges"],
            read_only=True,
            mem_limit="64m",
            memswap_limit="64m",
            pids_limit=16,
            sysctls={"net.ipv4.ip_unprivileged_port_start": "0"},
            labels=labels(owner, run_id, "guard", lease),
            log_config={"type": "json-file", "config": {"max-size": "64k", "max-file": "1"}},
            entrypoint=[],
        )
    except (APIError, DockerException) as exc:
        raise EvaluationError(
            FailureCode.PLATFORM_ERROR, f"could not start the network guard: {exc}"
        ) from None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        output = guard.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        if READY_LINE in output:
            return guard
        guard.reload()
        if guard.status in ("exited", "dead"):
            raise EvaluationError(
                FailureCode.PLATFORM_ERROR,
                f"the network guard failed (is iptables usable in containers?): {output[-500:]}",
            )
        time.sleep(0.02)
    raise EvaluationError(FailureCode.PLATFORM_ERROR, "the network guard was not ready in time")


def keep_alive(client: docker.DockerClient, guard_id: str) -> None:
    """Tell a guard its owner lives (it resets its keep-alive window); errors are ignored:
    a missed ping is covered by the window, a gone guard has nothing to keep."""
    with contextlib.suppress(APIError, DockerException):
        client.api.kill(guard_id, signal=KEEPALIVE_SIGNAL)


def guard_ip(guard: Container, network_name: str) -> str:
    """The guard's (hence the model's) IP address on the run's internal network."""
    guard.reload()
    networks = guard.attrs["NetworkSettings"]["Networks"]
    address = (networks.get(network_name) or {}).get("IPAddress")
    if not address:
        raise EvaluationError(FailureCode.PLATFORM_ERROR, "the sandbox got no IP address")
    return str(address)


def cleanup_leftovers(
    owner: str,
    client: docker.DockerClient | None = None,
    is_lease_alive: Callable[[str], bool] | None = None,
) -> int:
    """Remove the containers, networks and volumes labelled for ``owner`` whose job lease is
    dead (every one when ``is_lease_alive`` is None); returns how many this call removed
    (objects others remove meanwhile are fine).

    A worker calls this on start: whatever a crashed predecessor with the same id left
    behind goes away, but a run whose lease still holds its job belongs to a live worker
    that happens to share the id (another host or lock folder), and is left alone.
    """
    client = client or docker.from_env()
    selector = [f"{MANAGED}=1", f"{OWNER}={owner}"]

    def ours(labels: dict[str, str] | None) -> bool:
        lease = (labels or {}).get(LEASE)
        return is_lease_alive is None or lease is None or not is_lease_alive(lease)

    removed = 0
    for container in objects.list_containers(client, selector):
        if ours(container.get("Labels")):
            removed += objects.remove_container(client, container["Id"])
    for network in objects.list_networks(client, selector):
        if ours(network.get("Labels")):
            objects.evict_endpoints(client, network["Id"])
            removed += objects.remove_network(client, network["Id"])
    for volume in objects.list_volumes(client, selector):
        if ours(volume.get("Labels")):
            removed += objects.remove_volume(client, volume["Name"])
    return removed
