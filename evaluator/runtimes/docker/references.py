"""Registry image references: what a submitter may name for the worker to pull (never a
server path, a local image ID or a bare digest)."""

from __future__ import annotations

import re

# The reference grammar of distribution/reference: [domain[:port]/]path[:tag][@digest].
_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_DOMAIN = rf"{_LABEL}(?:\.{_LABEL})*"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE = re.compile(
    rf"^(?:(?P<domain>{_DOMAIN}(?::[0-9]+)?)/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$"
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
        raise ValueError(
            f"{ref!r} is not a registry reference such as registry.example.org/team/model:1"
        )
    return ref
