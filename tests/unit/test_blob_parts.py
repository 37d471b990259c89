"""Blobs written part by part (resumable uploads), on the local folder and on S3 (moto's
server on 127.0.0.1): nothing is visible until finished, a part sent again replaces it, a
short part is not stored, and finishing or aborting leaves nothing behind."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from store.blobs import BlobStore, LocalBlobStore, PartsNotFound, ShortPart, StoredPart
from tests.unit.test_blobs import leftovers, s3_store

MiB = 1 << 20
PART = 5 * MiB  # S3's smallest part but the last


# S3 through moto's server costs seconds a case: the full lane runs it, the fast lane not
@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.slow)])
def blobs(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    if request.param == "local":
        return LocalBlobStore(tmp_path / "blobs")
    return s3_store(request.getfixturevalue("s3"), tmp_path)


def _bytes(size: int, seed: int) -> bytes:
    return bytes((seed + i * 7) % 251 for i in range(256)) * (size // 256) + b"x" * (size % 256)


def _put(blobs: BlobStore, handle: str, number: int, data: bytes) -> None:
    blobs.put_part("img.tar", handle, number, (number - 1) * PART, io.BytesIO(data), len(data))


def test_parts_in_any_order_make_the_blob_only_when_finished(blobs: BlobStore) -> None:
    parts = [_bytes(PART, 1), _bytes(PART, 2), _bytes(1234, 3)]
    handle = blobs.start_parts("img.tar")
    _put(blobs, handle, 3, parts[2])
    _put(blobs, handle, 1, parts[0])
    assert not blobs.exists("img.tar")
    assert list(blobs.keys()) == []
    assert blobs.stored_parts("img.tar", handle) == [StoredPart(1, PART), StoredPart(3, 1234)]
    _put(blobs, handle, 2, parts[1])
    assert blobs.finish_parts("img.tar", handle, 3) == 2 * PART + 1234
    assert blobs.get_bytes("img.tar") == b"".join(parts)
    assert leftovers(blobs) == [blobs.local_path("img.tar")] or not leftovers(blobs)
    with pytest.raises(PartsNotFound):
        blobs.stored_parts("img.tar", handle)


def test_a_part_sent_again_replaces_it(blobs: BlobStore) -> None:
    handle = blobs.start_parts("img.tar")
    _put(blobs, handle, 1, _bytes(PART, 1))
    _put(blobs, handle, 1, _bytes(PART, 9))
    _put(blobs, handle, 2, b"end")
    blobs.finish_parts("img.tar", handle, 2)
    assert blobs.get_bytes("img.tar") == _bytes(PART, 9) + b"end"


def test_a_short_part_is_not_stored(blobs: BlobStore) -> None:
    handle = blobs.start_parts("img.tar")
    with pytest.raises(ShortPart):
        blobs.put_part("img.tar", handle, 1, 0, io.BytesIO(b"only this"), PART)
    assert blobs.stored_parts("img.tar", handle) == []


def test_finishing_with_a_gap_is_refused_and_keeps_the_parts(blobs: BlobStore) -> None:
    handle = blobs.start_parts("img.tar")
    _put(blobs, handle, 1, _bytes(PART, 1))
    _put(blobs, handle, 3, b"tail")
    with pytest.raises(ValueError, match="not all stored"):
        blobs.finish_parts("img.tar", handle, 3)
    assert not blobs.exists("img.tar")
    assert [p.number for p in blobs.stored_parts("img.tar", handle)] == [1, 3]


def test_abort_leaves_nothing_and_unknown_handles_are_not_found(blobs: BlobStore) -> None:
    handle = blobs.start_parts("img.tar")
    _put(blobs, handle, 1, _bytes(PART, 1))
    blobs.abort_parts("img.tar", handle)
    blobs.abort_parts("img.tar", handle)  # twice is fine
    assert leftovers(blobs) == []
    assert not blobs.exists("img.tar")
    for unknown in (handle, "0" * 32, "../../etc"):
        with pytest.raises(PartsNotFound):
            blobs.stored_parts("img.tar", unknown)
        if isinstance(blobs, LocalBlobStore):  # moto answers 500 where S3 says NoSuchUpload
            with pytest.raises(PartsNotFound):
                _put(blobs, unknown, 1, b"x")


def test_local_parts_are_never_listed_as_blobs(tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path / "blobs")
    blobs.put_bytes("kept.bin", b"k")
    handle = blobs.start_parts("img.tar")
    _put(blobs, handle, 1, b"part")
    assert list(blobs.keys()) == ["kept.bin"]


def test_two_sends_of_one_part_at_once_store_one_of_them_whole(tmp_path: Path) -> None:
    """A part sent twice at once (two clients resuming one upload) is one send's bytes,
    never a mix of both (S3 replaces a part whole by itself)."""
    import threading

    blobs = LocalBlobStore(tmp_path / "blobs")
    handle = blobs.start_parts("img.tar")
    sends = [_bytes(PART, 1), _bytes(PART, 2)]
    for _ in range(3):
        threads = [
            threading.Thread(target=_put, args=(blobs, handle, 1, sends[i % 2])) for i in range(6)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stored = (blobs.root / ".parts" / handle / "data").read_bytes()[:PART]
        assert stored in sends


def test_local_parts_are_private_to_the_service(tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path / "blobs")
    handle = blobs.start_parts("img.tar")
    _put(blobs, handle, 1, b"part")
    folder = blobs.root / ".parts" / handle
    assert folder.stat().st_mode & 0o777 == 0o700
    assert (folder / "data").stat().st_mode & 0o777 == 0o600
    blobs.finish_parts("img.tar", handle, 1)
    assert blobs.local_path("img.tar").stat().st_mode & 0o777 == 0o600


@pytest.mark.slow
def test_an_s3_error_while_sending_a_part_is_that_error(
    s3: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection reset while S3 reads the part is reported as itself, not as a part
    that ended short."""
    store = s3_store(s3, tmp_path)
    handle = store.start_parts("img.tar")

    def reset(**kwargs: object) -> None:
        kwargs["Body"].read(4)  # type: ignore[attr-defined]
        raise OSError("connection reset by peer")

    monkeypatch.setattr(store.client, "upload_part", reset)  # type: ignore[attr-defined]
    with pytest.raises(OSError, match="connection reset"):
        store.put_part("img.tar", handle, 1, 0, io.BytesIO(b"x" * 100), 100)
    store.abort_parts("img.tar", handle)
