"""Build a Runtime from a stored runtime spec (a plain dict kept with the model row).

``{"kind": "process", "command": [...], "cwd": ..., "protocol": "v1"}``
``{"kind": "url", "url": "http://127.0.0.1:8080", "protocol": "v1"}``
``{"kind": "docker", "image": "<id or reference>", "blob": "<tarball key>", "protocol": ...}``
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evaluator.process_runtime import ProcessRuntime
from evaluator.runtime import Limits, Runtime
from evaluator.url_runtime import UrlRuntime
from store.blobs import BlobStore

RUNTIME_KINDS = ("docker", "process", "url")
PROTOCOLS = ("v1", "dynalab2")
REPO_ROOT = Path(__file__).resolve().parent.parent


def validate_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A normalised copy of ``spec`` or ValueError with a sentence."""
    kind = spec.get("kind")
    if kind not in RUNTIME_KINDS:
        raise ValueError(f"runtime kind must be one of {', '.join(RUNTIME_KINDS)}")
    protocol = spec.get("protocol", "v1")
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}")
    required = {"process": "command", "url": "url", "docker": "image"}[kind]
    if kind == "docker" and spec.get("blob"):
        required = "blob"
    if not spec.get(required):
        raise ValueError(f"a {kind} runtime needs {required!r}")
    return {**spec, "protocol": protocol}


def make_runtime(
    spec: Mapping[str, Any], limits: Limits, blobs: BlobStore, *, owner: str = "dynaeval"
) -> Runtime:
    """The runtime a model row describes; Docker images from tarballs are loaded first."""
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
    from evaluator.docker_runtime import DockerRuntime
    from evaluator.images import load_tarball, resolve_source

    if spec.get("blob"):
        image = load_tarball(blobs.local_path(spec["blob"]), limits)
    else:
        image = resolve_source(spec["image"], limits)
    return DockerRuntime(image.image_id, limits, spec["protocol"], label_owner=owner)
