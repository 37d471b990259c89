"""Build a Runtime from a runtime spec (typed, see ``evaluator.runtimes.specs``); Docker
images are loaded or pulled first."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, assert_never

from configs.paths import REPO_ROOT
from configs.schema import Limits
from evaluator.runtimes.process import ProcessRuntime
from evaluator.runtimes.runtime import Runtime
from evaluator.runtimes.specs import (
    DockerSource,
    DockerSpec,
    ProcessSpec,
    RuntimeSpec,
    UrlSpec,
    parse_runtime_spec,
)
from evaluator.runtimes.url import UrlRuntime
from store.blobs import BlobStore


def make_runtime(
    spec: RuntimeSpec | Mapping[str, Any],
    limits: Limits,
    blobs: BlobStore,
    *,
    owner: str = "dynaeval",
    lease: str | None = None,
) -> Runtime:
    """The runtime a spec (or a model row's stored spec) describes. ``lease`` (the job's
    claim token) labels a Docker run's objects, so a reaper can tell when nobody owns them."""
    spec = parse_runtime_spec(spec)
    match spec:
        case ProcessSpec():
            cwd = spec.cwd
            cwd_path = (REPO_ROOT / cwd) if cwd and not Path(cwd).is_absolute() else cwd
            return ProcessRuntime(spec.command, limits=limits, protocol=spec.protocol, cwd=cwd_path)
        case UrlSpec():
            return UrlRuntime(spec.url, protocol=spec.protocol)
        case DockerSpec():
            return _docker_runtime(spec, limits, blobs, owner, lease)
        case _:
            assert_never(spec)


def _docker_runtime(
    spec: DockerSpec, limits: Limits, blobs: BlobStore, owner: str, lease: str | None
) -> Runtime:
    # Imported here so the process and url runtimes work where no Docker engine is installed.
    from configs.vocabulary.failures import FailureCode
    from evaluator.errors import EvaluationError
    from evaluator.runtimes.docker import images
    from evaluator.runtimes.docker.runtime import DockerRuntime

    if spec.source is DockerSource.REGISTRY:
        acquired = images.acquire_pull(str(spec.image), limits)
    elif spec.blob:  # "upload", or a "local" row the CLI stored with its tarball
        acquired = images.acquire_tarball(blobs.local_path(spec.blob), limits)
    else:
        acquired = images.acquire_local(str(spec.image), limits)
    image_id = acquired.ref.image_id
    try:
        pinned = spec.image_id
        if spec.source is DockerSource.UPLOAD and pinned and pinned != image_id:
            raise EvaluationError(
                FailureCode.IMAGE_NOT_LOADABLE,
                f"the stored tarball holds {image_id}, not {pinned} it was submitted as",
            )
        return DockerRuntime(
            image_id,
            limits,
            spec.protocol,
            label_owner=owner,
            lease=lease,
            remove_image_on_stop=acquired.fresh,
            own_tags=acquired.own_tags,
        )
    except BaseException:
        if acquired.fresh:
            images.release(image_id, acquired.own_tags)
        raise
