"""Build a Runtime from a stored runtime spec (a plain dict kept with the model row).

``{"kind": "process", "command": [...], "cwd": ..., "protocol": "v1"}``
``{"kind": "url", "url": "http://127.0.0.1:8080", "protocol": "v1"}``
``{"kind": "docker", "source": "upload", "blob": "<tarball key>", "protocol": ...}``
``{"kind": "docker", "source": "registry", "image": "<registry reference>", "protocol": ...}``
``{"kind": "docker", "source": "local", "image": "<path, tag or reference>", ...}``

Docker sources: ``upload`` loads the tarball stored under ``blob`` and nothing else;
``registry`` always pulls ``image`` from its registry (never a local image, file or
directory); ``local`` is for trusted local use only (CLI ``evaluate``, embedded example
models) and may name any server file, directory or local image. A spec without
``source`` is ``local`` (rows the CLI stored before sources existed); the API writes
``upload`` or ``registry``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from configs.paths import REPO_ROOT
from configs.schema import Limits
from evaluator.runtimes.process import ProcessRuntime
from evaluator.runtimes.runtime import Runtime
from evaluator.runtimes.url import UrlRuntime
from store.blobs import BlobStore, check_key

RUNTIME_KINDS = ("docker", "process", "url")
PROTOCOLS = ("v1", "dynalab2")
DOCKER_SOURCES = ("upload", "registry", "local")

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


def validate_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A normalised copy of ``spec`` or ValueError with a sentence."""
    kind = spec.get("kind")
    if kind not in RUNTIME_KINDS:
        raise ValueError(f"runtime kind must be one of {', '.join(RUNTIME_KINDS)}")
    protocol = spec.get("protocol", "v1")
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}")
    if kind == "docker":
        _validate_docker(spec)
        return {**spec, "protocol": protocol}
    required = {"process": "command", "url": "url"}[kind]
    if not spec.get(required):
        raise ValueError(f"a {kind} runtime needs {required!r}")
    return {**spec, "protocol": protocol}


def _validate_docker(spec: Mapping[str, Any]) -> None:
    source = spec.get("source", "local")
    if source not in DOCKER_SOURCES:
        raise ValueError(f"a docker runtime's source must be one of {', '.join(DOCKER_SOURCES)}")
    blob = spec.get("blob")
    if source == "registry":
        if blob:
            raise ValueError("a registry docker runtime takes no 'blob'")
        check_registry_reference(spec.get("image"))  # type: ignore[arg-type]
        return
    if source == "upload" and not blob:
        raise ValueError("an upload docker runtime needs 'blob'")
    if blob:
        if not isinstance(blob, str):
            raise ValueError("'blob' must be a blob key")
        check_key(blob)
    elif not spec.get("image"):
        raise ValueError("a docker runtime needs 'image'")


def make_runtime(
    spec: Mapping[str, Any], limits: Limits, blobs: BlobStore, *, owner: str = "dynaeval"
) -> Runtime:
    """The runtime a model row describes; Docker images are loaded or pulled first."""
    spec = validate_spec(spec)
    kind, protocol = spec["kind"], spec["protocol"]
    if kind == "process":
        cwd = spec.get("cwd")
        cwd_path = (REPO_ROOT / cwd) if cwd and not Path(cwd).is_absolute() else cwd
        return ProcessRuntime(spec["command"], limits=limits, protocol=protocol, cwd=cwd_path)
    if kind == "url":
        return UrlRuntime(spec["url"], protocol=protocol)
    return _docker_runtime(spec, limits, blobs, owner)


def _docker_runtime(
    spec: Mapping[str, Any], limits: Limits, blobs: BlobStore, owner: str
) -> Runtime:
    # Imported here so the process and url runtimes work where no Docker engine is installed.
    from configs.vocabulary.failures import FailureCode
    from evaluator.errors import EvaluationError
    from evaluator.runtimes.docker import images
    from evaluator.runtimes.docker.runtime import DockerRuntime

    source = spec.get("source", "local")
    if source == "registry":
        acquired = images.acquire_pull(spec["image"], limits)
    elif spec.get("blob"):  # "upload", or a "local" row the CLI stored with its tarball
        acquired = images.acquire_tarball(blobs.local_path(spec["blob"]), limits)
    else:
        acquired = images.acquire_local(spec["image"], limits)
    image_id = acquired.ref.image_id
    try:
        pinned = spec.get("image_id")
        if source == "upload" and pinned and pinned != image_id:
            raise EvaluationError(
                FailureCode.IMAGE_NOT_LOADABLE,
                f"the stored tarball holds {image_id}, not {pinned} it was submitted as",
            )
        return DockerRuntime(
            image_id,
            limits,
            spec["protocol"],
            label_owner=owner,
            remove_image_on_stop=acquired.fresh,
            own_tags=acquired.own_tags,
        )
    except BaseException:
        if acquired.fresh:
            images.release(image_id, acquired.own_tags)
        raise
