"""A ``docker save`` tarball is checked before anything loads it, and what the server reads
is what ``docker load`` would read: hostile names, links leaving the archive, special files,
twice-named members, multi-member gzip, bzip2/xz and decompression bombs are all refused,
at a bounded cost (an injectable CPU clock bounds the scan's time)."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import lzma
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from configs.schema import Limits
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.runtimes.docker.tarballs import MAX_RATIO, inspect_tarball

CONFIG_BYTES = b'{"architecture": "amd64", "os": "linux"}'
DIGEST = hashlib.sha256(CONFIG_BYTES).hexdigest()  # docker names a config by its digest
CONFIG = f"{DIGEST}.json"
LAYER = "0" * 64 + "/layer.tar"
LIMITS = Limits(max_image_bytes=1024**3)
Extra = Callable[[tarfile.TarFile], None]


def _add(tar: tarfile.TarFile, name: str, data: bytes = b"", **fields: object) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data) if fields.get("type", tarfile.REGTYPE) == tarfile.REGTYPE else 0
    for key, value in fields.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data) if info.size else None)


def _link(tar: tarfile.TarFile, name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> None:
    _add(tar, name, type=kind, linkname=target)


def _image(
    path: Path,
    *,
    layers: list[str] | None = None,
    extra: Extra | None = None,
    layer_bytes: bytes = b"layer",
    write_layer: bool = True,
) -> Path:
    """A minimal image tarball in docker save's legacy layout, plus ``extra`` members."""
    layers = layers or [LAYER]
    manifest = [{"Config": CONFIG, "RepoTags": ["m:1"], "Layers": layers}]
    with tarfile.open(path, "w") as tar:
        _add(tar, CONFIG, CONFIG_BYTES)
        if write_layer:
            _add(tar, LAYER, layer_bytes)
        if extra is not None:
            extra(tar)
        _add(tar, "manifest.json", json.dumps(manifest).encode())
    return path


def _gzipped(path: Path) -> Path:
    packed = path.with_name(path.name + ".gz")
    packed.write_bytes(gzip.compress(path.read_bytes(), compresslevel=9))
    return packed


def _refused(path: Path, code: FailureCode = FailureCode.IMAGE_NOT_LOADABLE, **kw: object) -> str:
    with pytest.raises(EvaluationError) as caught:
        inspect_tarball(path, LIMITS, **kw)  # type: ignore[arg-type]
    assert caught.value.code == code, caught.value.message
    return caught.value.message


@pytest.fixture
def tmp(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


def test_a_well_formed_image_passes_plain_and_gzipped(tmp: Path) -> None:
    plain = _image(tmp / "m.tar")
    assert inspect_tarball(plain, LIMITS) == (f"sha256:{DIGEST}", ["m:1"])
    assert inspect_tarball(_gzipped(plain), LIMITS)[0] == f"sha256:{DIGEST}"


@pytest.mark.parametrize(
    "name",
    ["../../manifest.json", "/etc/cron.d/x", "a/../../b", "./../x", "a//b", "a/./b", "a\\b"],
)
def test_names_outside_or_unlike_the_archive_are_refused(tmp: Path, name: str) -> None:
    tarball = _image(tmp / "m.tar", extra=lambda tar: _add(tar, name, b"x"))
    assert "plain paths inside the archive" in _refused(tarball)


def test_the_manifest_cannot_be_reached_by_a_traversal_name(tmp: Path) -> None:
    """``name.lstrip('./')`` read ``../../manifest.json`` as the manifest: no longer."""
    tarball = tmp / "m.tar"
    with tarfile.open(tarball, "w") as tar:
        _add(tar, CONFIG, CONFIG_BYTES)
        _add(tar, LAYER, b"l")
        body = json.dumps([{"Config": CONFIG, "Layers": [LAYER]}]).encode()
        _add(tar, "../../manifest.json", body)
    _refused(tarball)


@pytest.mark.parametrize("target", ["/etc/passwd", "../../etc/passwd", "../../../root"])
def test_symlinks_leaving_the_archive_are_refused(tmp: Path, target: str) -> None:
    tarball = _image(tmp / "m.tar", extra=lambda tar: _link(tar, "extra/link", target))
    assert "points outside" in _refused(tarball)


@pytest.mark.parametrize("target", ["../outside", "/etc/shadow"])
def test_hard_links_leaving_the_archive_are_refused(tmp: Path, target: str) -> None:
    tarball = _image(tmp / "m.tar", extra=lambda tar: _link(tar, "h", target, tarfile.LNKTYPE))
    _refused(tarball)


def test_a_layer_that_is_a_symlink_out_of_the_archive_is_refused(tmp: Path) -> None:
    tarball = _image(
        tmp / "m.tar", write_layer=False, extra=lambda tar: _link(tar, LAYER, "../../../etc")
    )
    _refused(tarball)


def test_a_layer_linking_to_a_missing_or_directory_member_is_refused(tmp: Path) -> None:
    def extra(tar: tarfile.TarFile) -> None:
        _add(tar, "d", type=tarfile.DIRTYPE)
        _link(tar, LAYER, "../d")

    assert "does not lead to a file" in _refused(
        _image(tmp / "m.tar", write_layer=False, extra=extra)
    )


def test_a_layer_linking_to_another_layer_of_the_archive_passes(tmp: Path) -> None:
    """``docker save`` itself links a layer it already wrote; that stays allowed."""
    other = "1" * 64 + "/layer.tar"
    tarball = _image(
        tmp / "m.tar",
        layers=[LAYER, other],
        extra=lambda tar: _link(tar, other, f"../{LAYER}"),
    )
    assert inspect_tarball(tarball, LIMITS)[0] == f"sha256:{DIGEST}"


@pytest.mark.parametrize("kind", [tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE])
def test_special_files_are_refused(tmp: Path, kind: bytes) -> None:
    tarball = _image(tmp / "m.tar", extra=lambda tar: _add(tar, "dev/x", type=kind))
    assert "only files, directories and links" in _refused(tarball)


def test_a_member_named_twice_is_refused(tmp: Path) -> None:
    decoy = json.dumps([{"Config": CONFIG, "Layers": ["elsewhere"]}]).encode()
    tarball = _image(tmp / "m.tar", extra=lambda tar: _add(tar, "manifest.json", decoy))
    assert "two members named" in _refused(tarball)


def test_a_second_gzip_member_is_refused(tmp: Path) -> None:
    """Appending a 1-byte member defeated the trailer check; now the stream must be one."""
    packed = _gzipped(_image(tmp / "m.tar"))
    packed.write_bytes(packed.read_bytes() + gzip.compress(b"x"))
    assert "more than one member" in _refused(packed)
    junk = _gzipped(_image(tmp / "n.tar"))
    junk.write_bytes(junk.read_bytes() + b"\x00" * 512)
    assert "trailing bytes" in _refused(junk)


@pytest.mark.parametrize(("name", "compress"), [("bzip2", bz2.compress), ("xz", lzma.compress)])
def test_bzip2_and_xz_are_refused_with_what_to_do(
    tmp: Path, name: str, compress: Callable[[bytes], bytes]
) -> None:
    packed = tmp / "m.tar.x"
    packed.write_bytes(compress(_image(tmp / "m.tar").read_bytes()))
    message = _refused(packed)
    assert name in message and "gzip" in message


def test_a_gzip_bomb_is_refused_at_the_ratio_after_little_work(tmp: Path) -> None:
    zeros = bytes(48 * 2**20)  # a "layer" of zeros: gzip packs it ~1000 times
    packed = _gzipped(_image(tmp / "m.tar", layer_bytes=zeros))
    assert packed.stat().st_size * MAX_RATIO < len(zeros)
    message = _refused(packed, FailureCode.IMAGE_TOO_LARGE)
    assert f"more than {MAX_RATIO} times its gzipped size" in message


def test_a_bomb_of_many_small_members_is_refused_by_its_ratio_so_far(tmp: Path) -> None:
    """Each member's size fits and so does their sum: the stream's ratio gives it away."""
    packed = tmp / "m.tar.gz"
    with (
        gzip.open(packed, "wb", compresslevel=9) as out,
        tarfile.open(fileobj=out, mode="w|") as tar,
    ):
        for index in range(24):
            _add(tar, f"{index:064d}/layer.tar", bytes(2**20))
    message = _refused(packed, FailureCode.IMAGE_TOO_LARGE)
    assert f"more than {MAX_RATIO} times its gzipped size" in message


def test_a_scan_over_its_cpu_time_is_refused(tmp: Path) -> None:
    seconds = iter(range(0, 10**6, 5))  # each look at the clock: 5 s more of CPU
    packed = _gzipped(_image(tmp / "m.tar", layer_bytes=bytes(2**20)))
    message = _refused(packed, FailureCode.IMAGE_TOO_LARGE, cpu_clock=lambda: float(next(seconds)))
    assert "CPU time" in message


def test_a_second_manifest_behind_a_directory_link_is_refused(tmp: Path) -> None:
    """``x -> .`` then ``x/manifest.json``: docker load read the hidden manifest, the check
    read the first one (found from outside)."""
    decoy = json.dumps([{"Config": "b" * 64 + ".json", "Layers": ["zz/layer.tar"]}]).encode()

    def extra(tar: tarfile.TarFile) -> None:
        _link(tar, "x", ".")
        _add(tar, "x/manifest.json", decoy)

    _refused(_image(tmp / "m.tar", extra=extra))


def test_a_link_reached_through_a_directory_link_is_refused(tmp: Path) -> None:
    def extra(tar: tarfile.TarFile) -> None:
        _link(tar, "a", ".")
        _link(tar, "a/a/a/b", "../../../etc/passwd")  # really b -> ../../../etc/passwd

    _refused(_image(tmp / "m.tar", extra=extra))


@pytest.mark.parametrize("target", [".", "sub", "missing"])
def test_a_link_to_a_directory_or_to_nothing_is_refused(tmp: Path, target: str) -> None:
    def extra(tar: tarfile.TarFile) -> None:
        _add(tar, "sub", type=tarfile.DIRTYPE)
        _link(tar, "l", target)

    assert "does not lead to a file" in _refused(_image(tmp / "m.tar", extra=extra))


def test_a_file_then_a_directory_of_the_same_name_is_refused(tmp: Path) -> None:
    tarball = _image(
        tmp / "m.tar", extra=lambda tar: _add(tar, "manifest.json/", type=tarfile.DIRTYPE)
    )
    assert "two members named" in _refused(tarball)


# -- what Python's tarfile and Go's archive/tar (docker load) read differently -----------------
def _decoy_manifest() -> bytes:
    return json.dumps([{"Config": "b" * 64 + ".json", "Layers": ["zz/layer.tar"]}]).encode()


def test_a_global_pax_header_is_refused(tmp: Path) -> None:
    """Python applies a global header's path to the next member, Go ignores it: one archive
    named two ways (found in review)."""
    tarball = tmp / "g.tar"
    with tarfile.open(
        tarball, "w", format=tarfile.PAX_FORMAT, pax_headers={"path": "decoy"}
    ) as tar:
        _add(tar, CONFIG, CONFIG_BYTES)
        _add(tar, LAYER, b"l")
        _add(tar, "manifest.json", json.dumps([{"Config": CONFIG, "Layers": [LAYER]}]).encode())
    assert "docker save" in _refused(tarball)


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT], ids=["gnu"])
def test_headers_without_posix_ustar_magic_are_refused(tmp: Path, fmt: int) -> None:
    tarball = tmp / "gnu.tar"
    with tarfile.open(tarball, "w", format=fmt) as tar:
        _add(tar, CONFIG, CONFIG_BYTES)
    assert "ustar magic" in _refused(tarball)


def test_a_v7_header_is_refused(tmp: Path) -> None:
    """Old-style headers (no magic): Python and Go treat their prefix and end differently."""
    tarball = _image(tmp / "m.tar")
    data = bytearray(tarball.read_bytes())
    data[257:265] = bytes(8)  # the first header's magic and version
    data[148:156] = b" " * 8
    data[148:156] = f"{sum(data[:512]):06o}\x00 ".encode()
    tarball.write_bytes(bytes(data))
    assert "ustar magic" in _refused(tarball)


def test_a_pax_path_or_a_long_name_is_refused(tmp: Path) -> None:
    """docker save's names fit ustar; a PAX path (or a GNU long name) is where readers part."""
    tarball = _image(tmp / "m.tar", extra=lambda tar: _add(tar, "d/" + "x" * 120, b"x"))
    assert "PAX record 'path'" in _refused(tarball)


def test_data_after_the_end_of_the_archive_is_refused(tmp: Path) -> None:
    """Python stopped at a header it could not parse and skipped the rest unread; Go read on."""
    tarball = _image(tmp / "m.tar")
    with tarfile.open(tmp / "second.tar", "w") as tar:
        _add(tar, "manifest.json", _decoy_manifest())
    tarball.write_bytes(tarball.read_bytes() + (tmp / "second.tar").read_bytes())
    _refused(tarball)


def test_a_zstd_skippable_frame_is_refused(tmp: Path) -> None:
    polyglot = tmp / "z.tar"
    polyglot.write_bytes(b"\x50\x2a\x4d\x18" + _image(tmp / "m.tar").read_bytes())
    assert "zstd" in _refused(polyglot)


def test_a_huge_header_is_refused_before_it_is_read(tmp: Path) -> None:
    """A 512 MiB GNU long-name header cost 55 s of CPU and 1 GB of memory in one read."""
    packed = tmp / "l.tar.gz"
    with gzip.open(packed, "wb", compresslevel=1) as out:
        header = tarfile.TarInfo("././@LongLink")
        header.type, header.size = tarfile.GNUTYPE_LONGNAME, 64 << 20
        out.write(header.tobuf(format=tarfile.GNU_FORMAT))
        for _ in range(64):
            out.write(b"a" * (1 << 20))
    message = _refused(packed)
    assert "ustar magic" in message


# -- the image ID is the config's digest --------------------------------------------------------
def _config_named(tmp: Path, name: str, data: bytes, *, layout: str = "legacy") -> Path:
    """An image whose config ``data`` is stored under ``name``."""
    tarball = tmp / f"{layout}.tar"
    with tarfile.open(tarball, "w") as tar:
        _add(tar, name, data)
        _add(tar, LAYER, b"l")
        _add(tar, "manifest.json", json.dumps([{"Config": name, "Layers": [LAYER]}]).encode())
    return tarball


def test_a_config_not_named_by_its_own_digest_is_refused(tmp: Path) -> None:
    """An upload whose config claimed another image's ID was accepted: the submission bore
    that ID, and the worker kept the image it loaded (found by an outside tester)."""
    spoofed = _config_named(tmp, f"{'d2' * 32}.json", CONFIG_BYTES)
    message = _refused(spoofed)
    assert "sha256:" + "d2" * 32 in message and f"sha256:{DIGEST}" in message


def test_an_oci_layout_config_is_checked_against_its_blob_name(tmp: Path) -> None:
    good = _config_named(tmp, f"blobs/sha256/{DIGEST}", CONFIG_BYTES, layout="oci")
    assert inspect_tarball(good, LIMITS)[0] == f"sha256:{DIGEST}"
    other = b'{"os": "linux"}'
    bad = _config_named(tmp, f"blobs/sha256/{DIGEST}", other, layout="oci-bad")
    assert "does not hash to" in _refused(bad)


def test_a_config_reached_through_a_link_is_checked_at_its_target(tmp: Path) -> None:
    tarball = tmp / "linked.tar"
    with tarfile.open(tarball, "w") as tar:
        _add(tar, "real.json", b'{"os": "plan9"}')
        _link(tar, CONFIG, "real.json", tarfile.LNKTYPE)
        _add(tar, LAYER, b"l")
        _add(tar, "manifest.json", json.dumps([{"Config": CONFIG, "Layers": [LAYER]}]).encode())
    assert "does not hash to" in _refused(tarball)


def test_an_implausibly_large_config_is_refused(tmp: Path) -> None:
    huge = b'{"pad": "' + b"x" * (9 << 20) + b'"}'
    tarball = _config_named(tmp, hashlib.sha256(huge).hexdigest() + ".json", huge)
    assert "config" in _refused(tarball)


def test_a_plain_tarball_that_ends_inside_a_member_is_corrupt_not_a_bomb(tmp: Path) -> None:
    """A header declaring 100 MiB in a 2.5 KiB file was answered as a decompression bomb
    (413) although nothing is compressed (found by an outside tester)."""
    tarball = tmp / "cut.tar"
    header = tarfile.TarInfo("big")
    header.size = 100 << 20
    tarball.write_bytes(header.tobuf(format=tarfile.USTAR_FORMAT) + bytes(2048))
    message = _refused(tarball)
    assert "ends inside" in message and "bomb" not in message
