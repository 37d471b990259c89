"""Docker runtime sources in the factory: upload, registry, local (no engine needed).

The image functions and DockerRuntime are replaced by fakes that record what the factory
asked for, so these tests show which source may touch which server resource.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from configs.schema import Limits
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.runtimes.docker import images
from evaluator.runtimes.docker import runtime as docker_runtime
from evaluator.runtimes.docker.images import Acquired, ImageRef
from evaluator.runtimes.docker.references import check_registry_reference
from evaluator.runtimes.factory import make_runtime
from evaluator.runtimes.specs import parse_runtime_spec
from store.blobs import LocalBlobStore

DIGEST = "sha256:" + "ab" * 32
IMAGE_ID = "sha256:" + "cd" * 32


class Calls(list):
    """(name, first argument) of every image function called; ``fresh`` what they report."""

    fresh = True


class FakeRuntime:
    """Stands in for DockerRuntime: keeps its arguments."""

    def __init__(self, image: str, limits: Limits, protocol: str, **kwargs: Any) -> None:
        self.image, self.limits, self.protocol, self.kwargs = image, limits, protocol, kwargs


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    """Every image function the factory calls, as (name, first argument)."""
    made = Calls()

    def fake(name: str):
        def acquire(what: Any, limits: Limits, client: Any = None) -> Acquired:
            made.append((name, what))
            ref = ImageRef(IMAGE_ID, None, ("up/model:1",), 1000, "")
            tags = ("up/model:1",) if made.fresh else ()
            return Acquired(ref, fresh=made.fresh, own_tags=tags)

        return acquire

    for name in ("acquire_tarball", "acquire_pull", "acquire_local"):
        monkeypatch.setattr(images, name, fake(name))
    monkeypatch.setattr(
        images, "release", lambda image_id, tags=(), client=None: made.append(("release", image_id))
    )
    monkeypatch.setattr(docker_runtime, "DockerRuntime", FakeRuntime)
    return made


@pytest.fixture
def blobs(tmp_path: Path) -> LocalBlobStore:
    store = LocalBlobStore(tmp_path / "blobs")
    store.put_bytes("uploads/a.tar", b"not looked at by the fakes")
    return store


@pytest.mark.parametrize(
    "ref",
    [
        "127.0.0.1:5000/tiny:1",
        "localhost:5000/team/model",
        "registry.example.org/team/model:v1.2-rc_3",
        "alice/model",
        "model:latest",
        f"ghcr.io/a/b@{DIGEST}",
        f"ghcr.io/a/b:1@{DIGEST}",
    ],
)
def test_registry_references_accepted(ref: str) -> None:
    assert check_registry_reference(ref) == ref


@pytest.mark.parametrize(
    ("ref", "why"),
    [
        ("/srv/dynaeval/data/uploads/x.tar", "file path"),
        ("./models/x", "file path"),
        ("../other", "file path"),
        (".hidden", "file path"),
        ("~/model.tar", "file path"),
        ("~alice/model", "file path"),
        ("a/../../etc", "file path"),
        ("C:\\models\\x.tar", "file path"),
        (DIGEST, "image ID or digest"),
        (DIGEST.upper(), "image ID or digest"),
        ("ab" * 32, "image ID or digest"),
        ("", "required"),
        ("model name", "spaces"),
        ("model\n", "spaces"),
        ("Team/Model:1", "not a registry reference"),
        ("model:", "not a registry reference"),
        ("model@sha256:short", "not a registry reference"),
        ("http://registry/model", "not a registry reference"),
    ],
)
def test_registry_references_refused(ref: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        check_registry_reference(ref)


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"source": "registry", "image": "/srv/dir"}, "file path"),
        ({"source": "registry", "image": IMAGE_ID}, "image ID"),
        ({"source": "registry"}, "required"),
        ({"source": "registry", "image": "a/b:1", "blob": "uploads/a.tar"}, "no 'blob'"),
        ({"source": "upload", "image": "model.tar"}, "needs 'blob'"),
        ({"source": "upload", "blob": "../../etc/passwd"}, "invalid blob key"),
        ({"source": "upload", "blob": "/etc/passwd"}, "invalid blob key"),
        ({"source": "somewhere", "image": "a/b:1"}, "source must be one of"),
        ({}, "needs 'image'"),
    ],
)
def test_docker_specs_refused(spec: dict, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_runtime_spec({"kind": "docker", **spec})


def test_registry_source_always_pulls(calls: Calls, blobs: LocalBlobStore) -> None:
    spec = {"kind": "docker", "source": "registry", "image": "127.0.0.1:5000/m:1"}
    runtime = make_runtime(spec, Limits(), blobs, owner="w1")
    assert calls == [("acquire_pull", "127.0.0.1:5000/m:1")]
    assert runtime.image == IMAGE_ID  # pinned by ID, not the reference
    assert runtime.kwargs["label_owner"] == "w1"
    assert runtime.kwargs["remove_image_on_stop"] is True


@pytest.mark.parametrize(
    "image", ["/srv/dynaeval/blobs/uploads/other.tar", "/srv/project", IMAGE_ID, "~/x"]
)
def test_registry_source_never_touches_server_files_or_local_images(
    calls: Calls, blobs: LocalBlobStore, image: str
) -> None:
    with pytest.raises(ValueError):
        make_runtime({"kind": "docker", "source": "registry", "image": image}, Limits(), blobs)
    assert calls == []


def test_upload_source_loads_only_its_blob(calls: Calls, blobs: LocalBlobStore) -> None:
    spec = {
        "kind": "docker",
        "source": "upload",
        "blob": "uploads/a.tar",
        "image": "/srv/some/other/file.tar",  # a display name only: never opened
        "image_id": IMAGE_ID,
    }
    runtime = make_runtime(spec, Limits(), blobs)
    assert calls == [("acquire_tarball", blobs.local_path("uploads/a.tar"))]
    assert runtime.kwargs["remove_image_on_stop"] is True
    assert runtime.kwargs["own_tags"] == ("up/model:1",)


def test_upload_whose_image_changed_is_refused_and_released(
    calls: Calls, blobs: LocalBlobStore
) -> None:
    spec = {"kind": "docker", "source": "upload", "blob": "uploads/a.tar", "image_id": DIGEST}
    with pytest.raises(EvaluationError) as exc_info:
        make_runtime(spec, Limits(), blobs)
    assert exc_info.value.code == FailureCode.IMAGE_NOT_LOADABLE
    assert calls[-1] == ("release", IMAGE_ID)


def test_image_present_before_is_kept(calls: Calls, blobs: LocalBlobStore) -> None:
    calls.fresh = False
    spec = {"kind": "docker", "source": "upload", "blob": "uploads/a.tar"}
    runtime = make_runtime(spec, Limits(), blobs)
    assert runtime.kwargs["remove_image_on_stop"] is False
    assert runtime.kwargs["own_tags"] == ()


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"image": "dynaeval-example/null:latest"},
            ("acquire_local", "dynaeval-example/null:latest"),
        ),
        (
            {"source": "local", "image": "examples/models/null"},
            ("acquire_local", "examples/models/null"),
        ),
        ({"image": "model.tar", "blob": "uploads/a.tar"}, ("acquire_tarball", "blob")),
    ],
    ids=["default-local", "explicit-local", "cli-stored-blob"],
)
def test_local_source_as_before(
    calls: Calls, blobs: LocalBlobStore, spec: dict, expected: tuple
) -> None:
    """Rows without a source (stored by the CLI) resolve as they always did."""
    make_runtime({"kind": "docker", **spec}, Limits(), blobs)
    name, what = expected
    assert calls == [(name, blobs.local_path("uploads/a.tar") if what == "blob" else what)]
