"""Webhook delivery: claim due outbox rows (store.webhooks), POST each as signed JSON, record
the outcome (2xx delivered; anything else retried on the back-off schedule until the attempts
run out). Workers run one in a daemon thread (worker.worker).

Where a webhook may point is checked twice: its URL when it is created (``check_url``: no
loopback, private, link-local, metadata or local-network names, in any spelling) and the
address its name resolves to at each delivery (a name can be re-pointed at a private address
after the check: DNS rebinding). The request goes to the address that was checked, never
to a second lookup, and redirects are never followed. The operator's allow-list
(``webhook_allow_hosts``) lifts both checks for the hosts it names."""

from __future__ import annotations

import http.client
import ipaddress
import json
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Collection
from datetime import UTC
from urllib.parse import urlsplit

from configs.settings import load_settings
from configs.vocabulary.webhooks import DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, sign
from evaluator.runtimes.docker.references import check_registry_address, parse_ip_host
from store.webhooks import AttemptReport, DueDelivery, WebhookStore
from worker.outage import StoreHealth

log = logging.getLogger(__name__)
MAX_URL = 2048
_LOCAL_SUFFIXES = ("localhost", "local", "internal", "home.arpa", "localdomain", "lan")
Resolver = Callable[[str, int], list[str]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class Refused(ValueError):
    """A webhook address the platform will not call (the sentence says why)."""


# -- where a webhook may point ---------------------------------------------------------------
def check_url(url: str, allowed: Collection[str] = ()) -> str:
    """``url`` if a webhook may call it, else Refused: http(s) only, with a host that is
    neither an address on the platform's own networks nor a local name, unless allow-listed."""
    host, port = _target(url)
    if _allow_listed(host, port, allowed):
        return url
    address = parse_ip_host(host)
    if address is not None:
        if not public_address(address):
            raise Refused(
                f"{host} is a loopback, private, link-local or reserved address; only hosts "
                "the operator allow-lists (webhook_allow_hosts) may be on local networks"
            )
        return url
    name = host.rstrip(".")
    if "." not in name or any(name == s or name.endswith("." + s) for s in _LOCAL_SUFFIXES):
        raise Refused(
            f"{host} is a name on the local network; only hosts the operator allow-lists "
            "(webhook_allow_hosts) may be local"
        )
    return url


def public_address(address: IPAddress) -> bool:
    """Whether ``address`` is public, as the registry check judges it (every embedding of
    a private IPv4 in IPv6 included)."""
    literal = f"[{address}]" if address.version == 6 else str(address)
    try:
        check_registry_address(f"{literal}/probe")
    except ValueError:
        return False
    return True


def _target(url: str) -> tuple[str, int]:
    """``(host, port)`` of an http(s) URL, or Refused."""
    if not isinstance(url, str) or len(url) > MAX_URL or any(c.isspace() for c in url):
        raise Refused(f"a webhook URL is an http(s) URL of at most {MAX_URL} characters")
    try:
        parts = urlsplit(url)
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError as exc:
        raise Refused(f"{url!r} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not host:
        raise Refused(f"{url!r}: a webhook URL must be http:// or https:// with a host")
    return host, port or (443 if parts.scheme == "https" else 80)


def _allow_listed(host: str, port: int, allowed: Collection[str]) -> bool:
    for entry in allowed:
        entry = entry.strip().lower()
        if entry.startswith("["):  # [v6] or [v6]:port
            entry_host, _, rest = entry[1:].partition("]")
            entry_port = rest[1:] if rest.startswith(":") else ""
        elif entry.count(":") == 1:
            entry_host, _, entry_port = entry.partition(":")
        else:
            entry_host, entry_port = entry, ""
        if entry_host == host.strip("[]") and entry_port in ("", str(port)):
            return True
    return False


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to now."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]).split("%")[0] for info in infos))


# -- sending -----------------------------------------------------------------------------------
class _PinnedHTTP(http.client.HTTPConnection):
    """HTTP to an address chosen beforehand; the Host header keeps the URL's name."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedHTTPS(_PinnedHTTP):
    """HTTPS to an address chosen beforehand, the certificate checked against the name."""

    def connect(self) -> None:
        super().connect()
        context = ssl.create_default_context()
        self.sock = context.wrap_socket(self.sock, server_hostname=self.host)


class WebhookSender:
    """Delivers due webhook notifications from ``store``, in a thread or call by call."""

    def __init__(
        self,
        store: WebhookStore,
        *,
        allow_hosts: Collection[str] | None = None,
        poll_s: float = 1.0,
        timeout_s: float = 5.0,
        batch: int = 10,
        resolver: Resolver = system_resolver,
        health: StoreHealth | None = None,
    ) -> None:
        """``allow_hosts``: the operator's allow-list (None: the settings'); ``timeout_s``:
        connect and read timeout of each request; ``health``: the worker's view of the
        store, which logs an outage once whoever notices it."""
        self.store, self.poll_s, self.timeout_s, self.batch = store, poll_s, timeout_s, batch
        self.health = health or StoreHealth("webhook sender")
        self._allow_hosts, self.resolver = allow_hosts, resolver
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def allow_hosts(self) -> Collection[str]:
        if self._allow_hosts is None:
            self._allow_hosts = load_settings().webhook_allow_hosts
        return self._allow_hosts

    # -- the loop ----------------------------------------------------------------------------
    def start(self) -> None:
        self._stop.clear()
        thread = threading.Thread(target=self.run, name="webhook-sender", daemon=True)
        thread.start()
        # shown to stop() only once started: a stop from another thread (a signal as serve
        # starts) must never join a thread that has not started
        self._thread = thread

    def stop(self, timeout: float | None = None) -> None:
        """Stop claiming at once; a request in flight ends within its timeout."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(self.timeout_s + 1 if timeout is None else timeout)

    def run(self) -> None:
        while not self._stop.is_set():
            if not self.flush():
                self._stop.wait(self.poll_s)

    def flush(self) -> int:
        """:meth:`deliver_due`, never raising: a database outage must not end a worker."""
        try:
            sent = self.deliver_due()
        except Exception as exc:
            self.health.failed(exc)
            return 0
        self.health.reached()
        return sent

    def deliver_due(self) -> int:
        """Claim and send what is due now; how many were attempted."""
        due = self.store.claim_due(self.batch)
        for index, delivery in enumerate(due):
            if self._stop.is_set():  # the rest go back at once, uncharged
                for left in due[index:]:
                    self.store.release(left)
                return index
            self.store.record(delivery, self.send(delivery))
        return len(due)

    # -- one attempt -------------------------------------------------------------------------
    def send(self, delivery: DueDelivery) -> AttemptReport:
        """POST ``delivery`` once; never raises."""
        body = json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True).encode()
        now = int(self.store.clock.now().replace(tzinfo=UTC).timestamp())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "Dynaeval-Webhooks/1",
            EVENT_HEADER: delivery.event,
            DELIVERY_HEADER: delivery.id,
            SIGNATURE_HEADER: sign(delivery.secret, body, now),
        }
        try:
            connection = self._connect(delivery.url)
        except (Refused, OSError) as exc:
            return self._failed(delivery, _reason(exc))
        try:
            parts = urlsplit(delivery.url)._replace(scheme="", netloc="", fragment="")
            path = parts.geturl() or "/"
            connection.request("POST", path, body=body, headers=headers)
            response = connection.getresponse()
            response.read(4096)  # the receiver's answer is not ours to keep
        except (OSError, http.client.HTTPException) as exc:
            return self._failed(delivery, _reason(exc))
        finally:
            connection.close()
        log.info(
            "webhook delivery %s (%s) answered %s", delivery.id, delivery.event, response.status
        )
        return AttemptReport(status_code=response.status)

    def _connect(self, url: str) -> _PinnedHTTP:
        """A connection to the address the URL's host resolves to now, if it may be called."""
        check_url(url, self.allow_hosts)
        host, port = _target(url)
        literal = parse_ip_host(host)
        addresses = [str(literal)] if literal is not None else self.resolver(host, port)
        if not addresses:
            raise Refused(f"{host} resolves to no address")
        if not _allow_listed(host, port, self.allow_hosts):
            private = [a for a in addresses if not public_address(ipaddress.ip_address(a))]
            if private:
                raise Refused(f"{host} resolves to a non-public address ({private[0]})")
        kind = _PinnedHTTPS if urlsplit(url).scheme == "https" else _PinnedHTTP
        return kind(host, port, addresses[0], self.timeout_s)

    def _failed(self, delivery: DueDelivery, reason: str) -> AttemptReport:
        log.info("webhook delivery %s (%s) failed: %s", delivery.id, delivery.event, reason)
        return AttemptReport(error=reason)


def _reason(exc: Exception) -> str:
    """One short line: what went wrong, never a header or the body."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__
