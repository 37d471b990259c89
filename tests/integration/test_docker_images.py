"""Image sources: docker-save tarballs, a registry (Debian's docker-registry on 127.0.0.1),
local directories; size limits, corrupt and multi-image tarballs, tag hijacking."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import lzma
import os
import shutil
import socket
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from configs.schema import Limits
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.runtimes.docker import images, tarballs
from evaluator.runtimes.docker.images import (
    ImageRef,
    build_directory,
    image_ref,
    load_tarball,
    pull,
    resolve_source,
)
from evaluator.runtimes.docker.tarballs import inspect_tarball
from tests.integration.conftest import labelled_copy, remove_images

pytestmark = pytest.mark.docker

LIMITS = Limits(max_image_bytes=16 * 1024**2)
# Each test process builds its own (the tag is in the content, so the ids differ too): the
# module's tests run in several processes at once, and one's teardown removes its images.
TINY = tuple(f"dynaeval-test/tiny-{name}-{os.getpid()}:latest" for name in ("a", "b"))


def save(path: Path, *names: str, compress: bool | str = False) -> Path:
    """``docker save`` (optionally gzipped, or ``compress="xz"``) to ``path``."""
    subprocess.run(["docker", "save", "-o", str(path), *names], check=True)
    if compress:
        packed = path.with_name(path.name + (".xz" if compress == "xz" else ".gz"))
        opener = lzma.open if compress == "xz" else gzip.open
        with open(path, "rb") as src, opener(packed, "wb") as dst:
            shutil.copyfileobj(src, dst)
        path.unlink()
        return packed
    return path


@pytest.fixture(scope="module")
def tiny_images(docker_client, tmp_path_factory) -> Iterator[dict[str, ImageRef]]:
    """Two tiny FROM-scratch images, built with build_directory."""
    refs = {}
    for tag in TINY:
        context = tmp_path_factory.mktemp("tiny")
        (context / "hello.txt").write_text(f"hello from {tag}\n")
        (context / "Dockerfile").write_text("FROM scratch\nCOPY hello.txt /\nUSER 10001\n")
        refs[tag] = build_directory(context, docker_client, tag=tag)
    yield refs
    remove_images(docker_client, *TINY, *(ref.image_id for ref in refs.values()))


def assert_code(exc_info: pytest.ExceptionInfo[EvaluationError], code: FailureCode) -> str:
    assert exc_info.value.code == code, exc_info.value
    return exc_info.value.message


def test_build_directory_gives_a_pinned_ref(tiny_images):
    ref = tiny_images[TINY[0]]
    assert ref.image_id.startswith("sha256:")
    assert ref.tags == (TINY[0],)
    assert ref.user == "10001"
    assert 0 < ref.size_bytes < 1024 * 1024
    assert ref.digest is None


@pytest.mark.parametrize("compress", [False, True], ids=["tar", "tar.gz"])
def test_tarball_round_trip(docker_client, tiny_images, tmp_path, compress):
    original = tiny_images[TINY[0]]
    tarball = save(tmp_path / "model.tar", TINY[0], compress=compress)
    ref = load_tarball(tarball, LIMITS, docker_client)
    assert ref.image_id == original.image_id
    assert resolve_source(str(tarball), LIMITS, docker_client).image_id == original.image_id


def test_an_xz_tarball_is_refused_with_what_to_do(docker_client, tiny_images, tmp_path):
    """Only plain and gzip tarballs are inspected within bounds; xz says how to upload."""
    tarball = save(tmp_path / "model.tar", TINY[0], compress="xz")
    with pytest.raises(EvaluationError) as exc_info:
        load_tarball(tarball, LIMITS, docker_client)
    message = assert_code(exc_info, FailureCode.IMAGE_NOT_LOADABLE)
    assert "xz" in message and "gzip" in message


def test_corrupt_tarball_is_not_loadable(docker_client, tmp_path):
    garbage = tmp_path / "garbage.tar"
    garbage.write_bytes(b"\x00\x01not a tarball at all" * 1000)
    with pytest.raises(EvaluationError) as exc_info:
        load_tarball(garbage, LIMITS, docker_client)
    assert "corrupt or not a tar" in assert_code(exc_info, FailureCode.IMAGE_NOT_LOADABLE)


def test_tarball_without_manifest_or_layers_is_not_loadable(docker_client, tiny_images, tmp_path):
    no_manifest = tmp_path / "no-manifest.tar"
    with tarfile.open(no_manifest, "w") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"hello"))
    with pytest.raises(EvaluationError) as exc_info:
        load_tarball(no_manifest, LIMITS, docker_client)
    assert "no manifest.json" in assert_code(exc_info, FailureCode.IMAGE_NOT_LOADABLE)
    # A real save with its layers cut out: manifest.json names members that are missing.
    full = save(tmp_path / "full.tar", TINY[0])
    truncated = tmp_path / "truncated.tar"
    with tarfile.open(full) as src, tarfile.open(truncated, "w") as dst:
        for member in src.getmembers():
            if not member.name.endswith("layer.tar"):
                dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    with pytest.raises(EvaluationError) as exc_info:
        load_tarball(truncated, LIMITS, docker_client)
    assert "incomplete" in assert_code(exc_info, FailureCode.IMAGE_NOT_LOADABLE)


def test_multi_image_tarball_is_not_loadable(docker_client, tiny_images, tmp_path):
    tarball = save(tmp_path / "two.tar", *TINY)
    with pytest.raises(EvaluationError) as exc_info:
        load_tarball(tarball, LIMITS, docker_client)
    message = assert_code(exc_info, FailureCode.IMAGE_NOT_LOADABLE)
    assert "holds 2 images; upload exactly one" in message


def test_tarball_over_the_size_limit(docker_client, zoo_image, tmp_path):
    image = zoo_image("big_image")  # 64 MiB of zeros
    tarball = save(tmp_path / "big.tar", image)
    with pytest.raises(EvaluationError) as exc_info:
        load_tarball(tarball, LIMITS, docker_client)
    assert "tarball is" in assert_code(exc_info, FailureCode.IMAGE_TOO_LARGE)


def test_small_tarball_of_a_large_image(docker_client, zoo_image, tmp_path):
    """Compressed it is tiny; unpacked it is over the limit: refused, and not kept."""
    tag, image_id = labelled_copy(docker_client, zoo_image("big_image"), tmp_path)
    tarball = save(tmp_path / "big.tar", tag, compress=True)
    assert tarball.stat().st_size < LIMITS.max_image_bytes
    remove_images(docker_client, tag, image_id)
    with pytest.raises(EvaluationError) as exc_info:
        load_tarball(tarball, LIMITS, docker_client)
    assert "unpacks to" in assert_code(exc_info, FailureCode.IMAGE_TOO_LARGE)
    assert not docker_client.images.list(filters={"reference": tag})
    with pytest.raises(EvaluationError):
        image_ref(image_id, docker_client)


SMALL = Limits(max_image_bytes=1024**2)
_ZEROS_16M = gzip.compress(bytes(16 * 1024**2), compresslevel=9)  # ~16 KiB


def gzip_bomb(path: Path, header: tarfile.TarInfo, unpacked: int) -> Path:
    """A tar header then ``unpacked`` zero bytes, as concatenated gzip members (~1 KiB/GiB...
    well, ~1 MiB per GiB), written in milliseconds."""
    with open(path, "wb") as handle:
        handle.write(gzip.compress(header.tobuf(format=tarfile.USTAR_FORMAT)))
        for _ in range(unpacked // (16 * 1024**2)):
            handle.write(_ZEROS_16M)
    return path


@contextlib.contextmanager
def decompressed_bytes() -> Iterator[list[int]]:
    """How many bytes each scan decompressed (the work a bomb could force), not how long."""
    seen: list[int] = []
    original = tarballs._Budgeted.read

    def counting(self, size=-1):  # type: ignore[no-untyped-def]
        try:
            return original(self, size)
        finally:
            seen.append(self.work)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tarballs._Budgeted, "read", counting)
        yield seen


def test_gzip_bomb_stops_at_the_unpacked_limit(tmp_path):
    """1 GiB of members in a ~1 MiB .gz: refused as too large after reading one header."""
    layer = tarfile.TarInfo("layer.tar")
    layer.size = 1024**3
    bomb = gzip_bomb(tmp_path / "bomb.tar.gz", layer, 1024**3)
    assert bomb.stat().st_size < SMALL.max_image_bytes * 2
    limits = replace(SMALL, max_image_bytes=2 * 1024**2)
    with pytest.raises(EvaluationError) as exc_info, decompressed_bytes() as seen:
        inspect_tarball(bomb, limits)
    assert "unpacks to more than" in assert_code(exc_info, FailureCode.IMAGE_TOO_LARGE)
    # refused from the gzip trailer, or after at most one byte past the limit
    assert max(seen, default=0) <= limits.max_image_bytes + 1 < 1024**3


def test_huge_pax_header_is_not_read(tmp_path):
    """An extended header claiming 1 GiB is refused before tarfile reads it into memory."""
    pax = tarfile.TarInfo("././@PaxHeader")
    pax.type = tarfile.XHDTYPE
    pax.size = 1024**3
    bomb = gzip_bomb(tmp_path / "pax.tar.gz", pax, 1024**3)
    with pytest.raises(EvaluationError) as exc_info, decompressed_bytes() as seen:
        inspect_tarball(bomb, SMALL)
    assert_code(exc_info, FailureCode.IMAGE_TOO_LARGE)
    assert max(seen, default=0) <= SMALL.max_image_bytes + 1 < 1024**3


def _tar_gz(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_many_members_add_up_to_too_large(tmp_path):
    members = {"manifest.json": b"[]"} | {f"{i}/layer.tar": bytes(100 * 1024) for i in range(20)}
    tarball = _tar_gz(tmp_path / "many.tar.gz", members)
    with pytest.raises(EvaluationError) as exc_info:
        inspect_tarball(tarball, SMALL)
    assert_code(exc_info, FailureCode.IMAGE_TOO_LARGE)


def test_too_many_members_is_not_loadable(tmp_path, monkeypatch):
    monkeypatch.setattr(tarballs, "MAX_TAR_MEMBERS", 50)
    tarball = _tar_gz(tmp_path / "swarm.tar.gz", {f"f{i}": b"" for i in range(60)})
    with pytest.raises(EvaluationError) as exc_info:
        inspect_tarball(tarball, SMALL)
    assert "more than 50 members" in assert_code(exc_info, FailureCode.IMAGE_NOT_LOADABLE)


def test_tarball_cannot_hijack_a_local_tag(docker_client, tiny_images, tmp_path):
    victim, intruder = (tiny_images[tag] for tag in TINY)
    hijack_tag = "dynaeval-test/victim:latest"
    docker_client.images.get(victim.image_id).tag(hijack_tag)
    try:
        docker_client.images.get(intruder.image_id).tag("dynaeval-test/intruder-src:latest")
        subprocess.run(["docker", "tag", intruder.image_id, hijack_tag + "-tmp"], check=True)
        tarball = tmp_path / "hijack.tar"
        save(tarball, hijack_tag + "-tmp")
        _retag_manifest(tarball, hijack_tag)
        ref = load_tarball(tarball, LIMITS, docker_client)
        assert ref.image_id == intruder.image_id
        assert docker_client.images.get(hijack_tag).id == victim.image_id
    finally:
        remove_images(
            docker_client, hijack_tag, hijack_tag + "-tmp", "dynaeval-test/intruder-src:latest"
        )


def _retag_manifest(tarball: Path, tag: str) -> None:
    """Rewrite the RepoTags of a saved tarball (what a malicious uploader could do)."""
    rewritten = tarball.with_suffix(".new")
    with tarfile.open(tarball) as src, tarfile.open(rewritten, "w") as dst:
        for member in src.getmembers():
            data = src.extractfile(member) if member.isfile() else None
            if member.name == "manifest.json" and data is not None:
                manifest = json.loads(data.read())
                manifest[0]["RepoTags"] = [tag]
                body = json.dumps(manifest).encode()
                member.size = len(body)
                data = io.BytesIO(body)
            elif member.name == "repositories" and data is not None:
                repo, name_tag = tag.rsplit(":", 1)
                old = json.loads(data.read())
                body = json.dumps({repo: {name_tag: next(iter(next(iter(old.values())).values()))}})
                member.size = len(body.encode())
                data = io.BytesIO(body.encode())
            dst.addfile(member, data)
    rewritten.replace(tarball)


def test_pull_from_a_local_registry(docker_client, tiny_images, registry):
    reference = f"{registry}/tiny:1"
    source = tiny_images[TINY[0]]
    docker_client.images.get(source.image_id).tag(reference)
    try:
        for line in docker_client.images.push(
            f"{registry}/tiny", tag="1", stream=True, decode=True
        ):
            assert "error" not in line, line
        remove_images(docker_client, reference)
        ref = pull(reference, LIMITS, docker_client)
        assert ref.image_id == source.image_id
        assert ref.digest and ref.digest.startswith(f"{registry}/tiny@sha256:")
        by_digest = resolve_source(ref.digest, LIMITS, docker_client)
        assert by_digest.image_id == source.image_id
    finally:
        remove_images(docker_client, reference)


def test_pull_never_moves_a_local_tag(docker_client, tiny_images, registry):
    """The registry's image is pulled by digest even when a local tag has the same name."""
    remote, local = (tiny_images[tag] for tag in TINY)
    reference = f"{registry}/same-name:1"
    docker_client.images.get(remote.image_id).tag(reference)
    try:
        for line in docker_client.images.push(
            f"{registry}/same-name", tag="1", stream=True, decode=True
        ):
            assert "error" not in line, line
        docker_client.images.get(local.image_id).tag(reference)  # a local impostor
        acquired = images.acquire_pull(reference, LIMITS, docker_client)
        assert acquired.ref.image_id == remote.image_id
        assert not acquired.fresh  # it was here before (as tiny-a): never released
        assert docker_client.images.get(reference).id == local.image_id
    finally:
        remove_images(docker_client, reference)


def test_pull_errors(docker_client, zoo_image, registry):
    with pytest.raises(EvaluationError) as exc_info:
        pull(f"{registry}/no-such-model:1", LIMITS, docker_client)
    assert_code(exc_info, FailureCode.IMAGE_NOT_LOADABLE)  # the submission names nothing
    with socket.socket() as placeholder:  # a port nobody serves: the registry is "down"
        placeholder.bind(("127.0.0.1", 0))
        down = f"127.0.0.1:{placeholder.getsockname()[1]}"
        with pytest.raises(EvaluationError) as exc_info:
            pull(f"{down}/team/model:1", LIMITS, docker_client)
    assert_code(exc_info, FailureCode.PLATFORM_ERROR)  # not the submitter's fault: retried
    big = zoo_image("big_image")
    reference = f"{registry}/big:1"
    docker_client.images.get(big).tag(reference)
    try:
        for line in docker_client.images.push(f"{registry}/big", tag="1", stream=True, decode=True):
            assert "error" not in line, line
        remove_images(docker_client, reference)
        small = replace(LIMITS, max_image_bytes=32 * 1024**2)
        with pytest.raises(EvaluationError) as exc_info:
            pull(reference, small, docker_client)
        assert_code(exc_info, FailureCode.IMAGE_TOO_LARGE)
    finally:
        digests = docker_client.images.get(big).attrs.get("RepoDigests") or []
        remove_images(docker_client, reference, *(d for d in digests if d.startswith(registry)))
    assert docker_client.images.get(big).id  # an image that was here before is never removed


def test_resolve_source_directory_and_local_tag(docker_client, tiny_images, tmp_path):
    (tmp_path / "hello.txt").write_text(f"hello from {TINY[0]}\n")
    (tmp_path / "Dockerfile").write_text("FROM scratch\nCOPY hello.txt /\nUSER 10001\n")
    from_dir = resolve_source(str(tmp_path), LIMITS, docker_client)
    assert from_dir.image_id == tiny_images[TINY[0]].image_id  # same content, same ID
    assert resolve_source(TINY[1], LIMITS, docker_client).image_id == tiny_images[TINY[1]].image_id
    with pytest.raises(EvaluationError) as exc_info:
        build_directory(tmp_path / "nowhere", docker_client)
    assert_code(exc_info, FailureCode.IMAGE_NOT_LOADABLE)
