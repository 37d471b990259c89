"""Registry image references: what a submitter may name for the worker to pull (never a
server path, a local image ID or a bare digest, never a registry on the platform's own
network unless the operator allow-lists it)."""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Callable, Collection, Iterable

# The reference grammar of distribution/reference: [domain[:port]/]path[:tag][@digest].
_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_DOMAIN = rf"(?:{_LABEL}(?:\.{_LABEL})*|\[[0-9A-Fa-f:.]+\])"  # a name, or an IPv6 literal
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE = re.compile(
    rf"^(?:(?P<domain>{_DOMAIN}(?::[0-9]+)?)/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?\Z"
)
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def check_registry_reference(ref: str) -> str:
    """``ref`` if it is a registry reference (``[host[:port]/]name[:tag][@sha256:…]``), else
    ValueError with a sentence: paths, ``~``, image IDs and bare digests are refused."""
    if not isinstance(ref, str) or not ref:
        raise ValueError("a registry image reference is required")
    if len(ref) > 512 or any(ch.isspace() or not ch.isprintable() for ch in ref):
        raise ValueError("the image reference is too long or contains spaces or control chars")
    if ref[0] in "./~" or "\\" in ref or "/../" in f"/{ref}/" or "/./" in f"/{ref}/":
        raise ValueError(f"{ref!r} looks like a file path; give a registry reference")
    if ref.lower().startswith("sha256:") or _HEX64.match(ref.lower()):
        raise ValueError(
            f"{ref!r} is an image ID or digest, not a registry reference; "
            "give name@sha256:… to pin a digest"
        )
    match = _REFERENCE.match(ref)
    if match is None or len(match.group("path")) + len(match.group("domain") or "") > 255:
        if ref.lower() != ref and _REFERENCE.match(ref.lower()):
            raise ValueError(
                f"{ref!r} is not a registry reference: Docker repository names must be lowercase"
            )
        raise ValueError(
            f"{ref!r} is not a registry reference such as registry.example.org/team/model:1"
        )
    domain = match.group("domain")
    if domain and not _is_domain(domain):
        # Docker reads an uppercase first component as a registry host ("MyOrg/model" is
        # pulled from a host called MyOrg), never as a Docker Hub namespace.
        raise ValueError(
            f"{ref!r} is not a registry reference: Docker repository names must be lowercase"
        )
    return ref


def _is_domain(first: str) -> bool:
    """False for an uppercase first component with no dot or port (``MyOrg``): Docker takes
    it for a registry host, never for a Docker Hub namespace, so it is refused."""
    return any(ch in first for ch in ".:[") or first.lower() == first


def registry_host(ref: str) -> tuple[str, int | None] | None:
    """The registry ``(host, port)`` a checked reference is pulled from, or None for Docker
    Hub (a reference whose first component is no host). IPv6 hosts lose their brackets."""
    match = _REFERENCE.match(ref)
    domain = match.group("domain") if match else None
    if not domain or not any(ch in domain for ch in ".:[") and domain != "localhost":
        return None
    host, _, port = domain.rpartition(":") if not domain.endswith("]") else (domain, "", "")
    if not host or host.startswith("[") and not host.endswith("]"):  # "[::1]" with no port
        host, port = domain, ""
    return host.strip("[]").lower(), int(port) if port else None


# Names that only resolve inside the platform's own network: RFC 6761/6762/8375 special-use
# names, the ".internal" private-use TLD (cloud metadata hosts such as
# metadata.google.internal live there) and single-label names (found through the resolver's
# search domains, i.e. on the local network).
_LOCAL_SUFFIXES = ("localhost", "local", "internal", "home.arpa", "localdomain")


def check_registry_address(ref: str, allowed: Collection[str] = ()) -> None:
    """Refuse (ValueError) a checked reference whose registry is on the platform's own
    network: a loopback, link-local (cloud metadata), private, shared, unspecified, reserved
    or multicast address in any spelling Docker's resolver may accept (``2130706433``,
    ``0x7f.1``, ``[::ffff:127.0.0.1]``), or a name that only resolves locally
    (``localhost``, ``*.localhost``, ``*.local``, ``*.internal``, single labels) — unless
    the operator allow-listed it: ``allowed`` holds ``host`` (any port) or ``host:port``
    entries. No name is resolved here (at submission); :func:`check_pull_address` resolves
    it again when the worker pulls."""
    found = registry_host(ref)
    if found is None:
        return
    host, port = found
    if _allow_listed(host, port, allowed):
        return
    address = parse_ip_host(host)
    if address is not None:
        if not _public(address):
            raise ValueError(
                f"{ref!r}: the registry {host} is a loopback, private, link-local or reserved "
                "address; only registries the operator allow-lists may be on local networks"
            )
        return
    name = host.rstrip(".")
    if "." not in name or any(name == s or name.endswith("." + s) for s in _LOCAL_SUFFIXES):
        raise ValueError(
            f"{ref!r}: the registry {host} is a name on the local network; only registries "
            "the operator allow-lists may be local"
        )


class RegistryUnresolved(ValueError):
    """The registry's name did not resolve; ``temporary`` when the resolver said to try
    again (the platform's DNS, not the submission)."""

    def __init__(self, message: str, temporary: bool) -> None:
        super().__init__(message)
        self.temporary = temporary


Resolver = Callable[[str, int | None], list[str]]
"""The addresses a host name (with the port it is reached on) resolves to."""


def system_resolver(host: str, port: int | None) -> list[str]:
    """The addresses the system's resolver gives for ``host`` (every family)."""
    infos = socket.getaddrinfo(host, port or 443, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


def allowed_registries_from_env() -> list[str]:
    """The operator's allow-list of local-network registries: ``DYNAEVAL_ALLOWED_REGISTRIES``
    (``host`` or ``host:port``, comma-separated)."""
    value = os.environ.get("DYNAEVAL_ALLOWED_REGISTRIES", "")
    return [entry.strip() for entry in value.split(",") if entry.strip()]


# Entries the running process allow-lists on top of the environment's (``serve
# --allow-registry``): the embedded workers pull what the process's API accepted.
_PROCESS_ALLOWED: set[str] = set()


def allow_registries_for_pulls(entries: Iterable[str]) -> None:
    """Allow-list ``entries`` for every pull this process makes from now on."""
    _PROCESS_ALLOWED.update(entry.strip() for entry in entries if entry.strip())


def pull_allow_list() -> list[str]:
    """What a pull may reach on local networks: the environment's allow-list and this
    process's (:func:`allow_registries_for_pulls`)."""
    return [*allowed_registries_from_env(), *sorted(_PROCESS_ALLOWED)]


def check_pull_address(
    ref: str, allowed: Collection[str] = (), resolve: Resolver = system_resolver
) -> None:
    """Just before a pull: :func:`check_registry_address`, then resolve the registry's name
    and refuse (ValueError) when any answer is not a public address, unless allow-listed. A
    name that was public when submitted may point inside the platform's network by now (DNS
    rebinding); a name that does not resolve is refused too, as the pull would fail."""
    check_registry_address(ref, allowed)
    found = registry_host(ref)
    if found is None or parse_ip_host(found[0]) is not None:
        return  # Docker Hub, or an address literal check_registry_address already judged
    host, port = found
    if _allow_listed(host, port, allowed):
        return
    try:
        answers = resolve(host, port)
    except (OSError, UnicodeError) as exc:
        temporary = isinstance(exc, socket.gaierror) and exc.errno == socket.EAI_AGAIN
        message = f"{ref!r}: the registry {host} does not resolve ({exc})"
        raise RegistryUnresolved(message, temporary) from None
    if not answers:
        raise RegistryUnresolved(f"{ref!r}: the registry {host} does not resolve", False)
    for answer in answers:
        address = parse_ip_host(answer)
        if address is None or not _public(address):
            raise ValueError(
                f"{ref!r}: the registry {host} now resolves to {answer}, a loopback, private, "
                "link-local or reserved address; only registries the operator allow-lists "
                "may be on local networks"
            )


def _allow_listed(host: str, port: int | None, allowed: Collection[str]) -> bool:
    for entry in allowed:
        entry = entry.strip().lower()
        if not entry:
            continue
        found = registry_host(f"{entry}/x") if any(ch in entry for ch in ".:[") else None
        entry_host, entry_port = found if found else (entry.strip("[]"), None)
        if entry_host == host and entry_port in (None, port):
            return True
    return False


# IPv6 ranges that carry an IPv4 address in their low 32 bits: IPv4-compatible (deprecated),
# SIIT, NAT64 (well-known and local-use prefixes). The embedded address must be public too.
_EMBEDDING_IPV4 = tuple(
    ipaddress.IPv6Network(n) for n in ("::/96", "::ffff:0:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48")
)


def _public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and any(address in net for net in _EMBEDDING_IPV4):
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None and not _public(embedded):
            return False
        if address.teredo is not None and not all(_public(a) for a in address.teredo):
            return False
    return address.is_global and not address.is_multicast


_IPV4_PART = re.compile(r"0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*")


def parse_ip_host(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``host`` as an IP address if any resolver would read it as one: IPv6 literals and
    IPv4 in every ``inet_aton`` spelling (1 to 4 parts, each decimal, octal ``0…`` or hex
    ``0x…``, the last filling the remaining bytes: ``127.1``, ``2130706433``, ``0x7f.1``,
    ``0177.0.0.1``); None for a name."""
    host = host.strip("[]").rstrip(".")
    try:
        return ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        pass
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_IPV4_PART.fullmatch(p) for p in parts):
        return None
    numbers = [_ipv4_number(p) for p in parts]
    *leading, last = numbers
    if any(n > 255 for n in leading) or last >= 256 ** (5 - len(parts)):
        return None  # out of range: inet_aton refuses it, so it is a (strange) name
    value = 0
    for n in leading:
        value = value * 256 + n
    value = value * 256 ** (5 - len(parts)) + last
    return ipaddress.IPv4Address(value)


def _ipv4_number(part: str) -> int:
    if part[:2] in ("0x", "0X"):
        return int(part[2:] or "0", 16)
    return int(part, 8) if part.startswith("0") else int(part)
