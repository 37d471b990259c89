"""A model's runtime as it is stored with the model and handed to a worker: the JSON form of
``evaluator.runtimes.specs`` (``to_dict``), read back there by ``parse_runtime_spec``. Only
the evaluator validates it; every other layer passes it on as this shape."""

from __future__ import annotations

from typing import Literal, TypedDict


class StoredRuntime(TypedDict, total=False):
    """``kind`` first; a kind's fields left unset are omitted."""

    kind: Literal["process", "url", "docker"]
    protocol: str  # the dialect the model speaks (``evaluator.transport.dialects``)
    command: str | list[str]  # process: the command serving on $PORT
    cwd: str  # process: relative to the checkout
    url: str  # url: where the model already listens
    source: Literal["upload", "registry", "local"]  # docker: where the image comes from
    image: str  # docker: a reference (registry) or a local image, file or directory
    blob: str  # docker: an upload's tarball key in the blob store
    image_id: str  # docker: what an upload was submitted as (its digest)
