"""Resumable uploads through the API on both blob stores (a folder, and S3 on moto's server
at 127.0.0.1): parts in any order and sent again, checked against their digests, resumed
after a dropped connection, submitted once (idempotently), refused whole when bad, kept
from other users, and dropped when abandoned or left a day."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from api.app import create_app
from configs.vocabulary.clock import ManualClock
from store.blobs import LocalBlobStore
from store.models import ModelRow
from store.ratelimits import RateLimits
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import image_config
from tests.unit.test_blobs import leftovers, s3_store
from usecases.service import Service
from usecases.uploads import MAX_OPEN_UPLOADS

MiB = 1 << 20
TASK = "sentiment"


def image_tar(layer_bytes: int) -> bytes:
    """A `docker save` layout with one layer of ``layer_bytes`` (pseudo-random)."""
    layer = hashlib.shake_256(b"layer").digest(layer_bytes)
    config, config_bytes = image_config(7)
    members = {
        config: config_bytes,
        "l/layer.tar": layer,
        "manifest.json": json.dumps(
            [{"Config": config, "RepoTags": ["m:1"], "Layers": ["l/layer.tar"]}]
        ).encode(),
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@dataclasses.dataclass
class World:
    service: Service
    clock: ManualClock
    alice: FlaskClient
    bob: FlaskClient
    tarball: bytes

    def parts(self, upload: dict[str, Any]) -> list[bytes]:
        step = upload["part_bytes"]
        return [self.tarball[i : i + step] for i in range(0, len(self.tarball), step)]


# S3 through moto's server costs seconds a case: the full lane runs it, the fast lane not
@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.slow)])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    clock = ManualClock()
    service = Service.open(tmp_path / "data", clock=clock)
    service.rate_limits = RateLimits(writes=3)  # parts must not count as writes
    if request.param == "s3":
        service.blobs = s3_store(request.getfixturevalue("s3"), tmp_path)
        service.upload_part_bytes = 5 * MiB
        tarball = image_tar(11 * MiB)  # three parts of S3's 5 MiB
    else:
        service.upload_part_bytes = 4096
        tarball = image_tar(20_000)  # six parts of 4 KiB
    app = create_app(service)
    alice = signed_in(app.test_client(), issue_token(service, "alice", "researcher"))
    bob = signed_in(app.test_client(), issue_token(service, "bob", "researcher"))
    yield World(service, clock, alice, bob, tarball)
    service.close()


def start(client: FlaskClient, size: int, task: str = TASK) -> Any:
    return client.post(f"/api/v1/tasks/{task}/uploads", json={"size": size, "filename": "m.tar"})


def digest(data: bytes) -> str:
    return f"sha-256=:{base64.b64encode(hashlib.sha256(data).digest()).decode()}:"


def put(client: FlaskClient, upload_id: str, number: int, data: bytes, **headers: str) -> Any:
    return client.put(
        f"/api/v1/uploads/{upload_id}/parts/{number}",
        data=data,
        content_type="application/octet-stream",
        headers={"Content-Digest": digest(data), **headers},
    )


def submit(client: FlaskClient, upload_id: str, key: str | None = None, **extra: Any) -> Any:
    headers = {"Idempotency-Key": key} if key else {}
    body = {"name": "big", "upload": upload_id, "protocol": "v1", **extra}
    return client.post(f"/api/v1/tasks/{TASK}/submissions", json=body, headers=headers)


def models(service: Service) -> int:
    with service.db.session() as session:
        return session.query(ModelRow).count()


def stored_image(service: Service, model_id: str) -> bytes:
    with service.db.session() as session:
        model = session.get(ModelRow, model_id)
        assert model is not None
        return service.blobs.get_bytes(model.runtime["blob"])


def sent_whole(world: World) -> dict[str, Any]:
    upload = start(world.alice, len(world.tarball)).get_json()
    for number, data in reversed(list(enumerate(world.parts(upload), 1))):
        assert put(world.alice, upload["id"], number, data).status_code == 200
    return upload


def test_parts_in_any_order_become_one_submission_of_the_same_bytes(world: World) -> None:
    upload = start(world.alice, len(world.tarball))
    assert upload.status_code == 201, upload.get_json()
    body = upload.get_json()
    parts = world.parts(body)
    assert (
        body["parts"] == len(parts) >= 3 and body["received"] == [] and body["state"] == "receiving"
    )
    for number in (3, 1, 2):
        answer = put(world.alice, body["id"], number, parts[number - 1])
        assert answer.get_json() == {
            "number": number,
            "size": len(parts[number - 1]),
            "sha256": hashlib.sha256(parts[number - 1]).hexdigest(),
        }
    for number in range(4, len(parts) + 1):
        put(world.alice, body["id"], number, parts[number - 1])
    assert world.alice.get(body["url"]).get_json()["received"] == list(range(1, len(parts) + 1))
    made = submit(world.alice, body["id"], key="k-1")
    assert made.status_code == 201, made.get_json()
    assert stored_image(world.service, made.get_json()["id"]) == world.tarball
    state = world.alice.get(body["url"]).get_json()
    assert state["state"] == "submitted" and state["submission"] == made.get_json()["id"]
    # the same request again is the same submission; the upload cannot make a second one
    replay = submit(world.alice, body["id"], key="k-1")
    assert replay.status_code == 200 and replay.get_json()["id"] == made.get_json()["id"]
    world.clock.advance(61)  # this world's rate limit is 3 writes a minute
    again = submit(world.alice, body["id"], key="k-2")
    assert again.status_code == 409 and again.get_json()["error"]["code"] == "upload_submitted"
    assert models(world.service) == 1


def test_a_key_that_made_a_submission_from_one_upload_is_refused_for_another(
    world: World,
) -> None:
    first = sent_whole(world)
    assert submit(world.alice, first["id"], key="k-9").status_code == 201
    world.clock.advance(61)
    second = start(world.alice, len(world.tarball)).get_json()
    world.clock.advance(61)
    again = submit(world.alice, second["id"], key="k-9")
    assert again.status_code == 422
    assert again.get_json()["error"]["code"] == "idempotency_key_reused"
    assert world.alice.get(second["url"]).get_json()["state"] == "receiving"


def test_a_part_sent_again_replaces_it_and_a_dropped_one_is_not_stored(world: World) -> None:
    upload = start(world.alice, len(world.tarball)).get_json()
    parts = world.parts(upload)
    put(world.alice, upload["id"], 1, b"\0" * len(parts[0]))  # wrong bytes, right size
    cut = world.alice.put(
        f"/api/v1/uploads/{upload['id']}/parts/2",
        input_stream=io.BytesIO(parts[1][:100]),  # the connection dies after 100 bytes
        content_type="application/octet-stream",
        environ_overrides={"CONTENT_LENGTH": str(len(parts[1]))},
    )
    assert cut.status_code in (400, 422)
    assert "error" in cut.get_json()
    assert world.alice.get(upload["url"]).get_json()["received"] == [1]
    for number, data in enumerate(parts, 1):
        put(world.alice, upload["id"], number, data)
    made = submit(world.alice, upload["id"])
    assert made.status_code == 201, made.get_json()
    assert stored_image(world.service, made.get_json()["id"]) == world.tarball


def test_a_part_that_differs_from_its_digest_is_refused_and_not_stored(world: World) -> None:
    upload = start(world.alice, len(world.tarball)).get_json()
    part = world.parts(upload)[0]
    bad = put(world.alice, upload["id"], 1, part, **{"Content-Digest": digest(b"other")})
    assert bad.status_code == 422 and bad.get_json()["error"]["code"] == "part_digest_mismatch"
    garbled = put(world.alice, upload["id"], 1, part, **{"Content-Digest": "sha-256=:abc:"})
    assert garbled.status_code == 400 and garbled.get_json()["error"]["code"] == "bad_digest"
    assert world.alice.get(upload["url"]).get_json()["received"] == []


@pytest.mark.parametrize(
    ("number", "size_change", "status"),
    [(0, 0, 422), (-1, 0, 422), (10_001, 0, 422), (10**20, 0, 422), (99, 0, 422)]
    + [(1, -1, 422), (1, 1, 422)],
)
def test_parts_out_of_range_or_of_the_wrong_size_are_refused(
    world: World, number: int, size_change: int, status: int
) -> None:
    upload = start(world.alice, len(world.tarball)).get_json()
    data = world.parts(upload)[0]
    data = data[:size_change] if size_change < 0 else data + b"x" * size_change
    answer = put(world.alice, upload["id"], number, data)
    assert answer.status_code == status and "error" in answer.get_json()
    # no such part of this upload: said so (0 and 10,001 were a bare 404, as if no URL)
    assert answer.get_json()["error"]["code"] == "invalid_part"
    assert world.alice.get(upload["url"]).get_json()["received"] == []


def test_an_incomplete_upload_is_not_submitted_nor_charged(world: World) -> None:
    upload = start(world.alice, len(world.tarball)).get_json()
    put(world.alice, upload["id"], 2, world.parts(upload)[1])
    answer = submit(world.alice, upload["id"])
    assert answer.status_code == 409
    error = answer.get_json()["error"]
    assert error["code"] == "upload_incomplete" and "lacks parts 1, 3" in error["message"]
    assert models(world.service) == 0
    quota = world.alice.get(f"/api/v1/tasks/{TASK}/quota").get_json()
    assert quota["daily"]["used"] == 0 and quota["total"]["used"] == 0


def test_a_broken_tarball_is_refused_and_leaves_nothing(world: World) -> None:
    world.tarball = b"not a tarball " * (len(world.tarball) // 14)
    upload = sent_whole(world)
    answer = submit(world.alice, upload["id"])
    assert answer.status_code == 422 and answer.get_json()["error"]["code"] == "image_not_loadable"
    assert world.alice.get(upload["url"]).status_code == 404
    assert leftovers(world.service.blobs) == [] or _only_datasets(world)
    assert models(world.service) == 0


def _only_datasets(world: World) -> bool:
    """The local store also holds the tasks' datasets: no upload is among its files."""
    store = world.service.blobs
    assert isinstance(store, LocalBlobStore)
    parts = store.root / ".parts"
    return not list(store.keys("uploads/")) and (not parts.exists() or not any(parts.iterdir()))


def test_other_users_see_no_upload_of_alices(world: World) -> None:
    upload = start(world.alice, len(world.tarball)).get_json()
    part = world.parts(upload)[0]
    for answer in (
        world.bob.get(upload["url"]),
        put(world.bob, upload["id"], 1, part),
        world.bob.delete(upload["url"]),
        submit(world.bob, upload["id"]),
    ):
        assert answer.status_code == 404 and answer.get_json()["error"]["code"] == "unknown_upload"
    assert world.alice.get(upload["url"]).get_json()["received"] == []


@pytest.mark.parametrize(
    "name", ["a/b.tar", "..", ".", "x\u0085y", "evil\u202ergat.tar", "\x00", "x" * 256, ""]
)
def test_odd_file_names_are_refused(world: World, name: str) -> None:
    answer = world.alice.post(f"/api/v1/tasks/{TASK}/uploads", json={"size": 10, "filename": name})
    assert answer.status_code == 422, answer.get_json()


def test_sizes_and_open_uploads_are_bounded(world: World) -> None:
    limit = world.service.tasks[TASK].limits.max_image_bytes
    too_big = start(world.alice, limit + 1)
    assert too_big.status_code == 413 and too_big.get_json()["error"]["code"] == "image_too_large"
    assert start(world.alice, 0).status_code == 422
    assert start(world.alice, 10, task="no-such-task").status_code == 404
    for _ in range(MAX_OPEN_UPLOADS):
        world.clock.advance(61)  # rate-limit buckets refill
        assert start(world.alice, 10).status_code == 201
    crowded = start(world.alice, 10)
    assert crowded.status_code == 429 and crowded.get_json()["error"]["code"] == "too_many_uploads"
    assert start(world.bob, 10).status_code == 201  # another user's are their own


def test_deleted_and_day_old_uploads_leave_no_parts(world: World) -> None:
    dropped = start(world.alice, len(world.tarball)).get_json()
    put(world.alice, dropped["id"], 1, world.parts(dropped)[0])
    assert world.alice.delete(dropped["url"]).status_code == 200
    assert world.alice.get(dropped["url"]).status_code == 404
    left = start(world.alice, len(world.tarball)).get_json()
    put(world.alice, left["id"], 1, world.parts(left)[0])
    world.clock.advance(23 * 3600)
    put(world.alice, left["id"], 2, world.parts(left)[1])  # a part keeps it another day
    world.clock.advance(23 * 3600)
    assert world.alice.get(left["url"]).status_code == 200
    world.clock.advance(2 * 3600)
    bobs = start(world.bob, 10).get_json()  # anyone's start sweeps what is past its time
    assert world.alice.get(left["url"]).status_code == 404
    assert world.bob.delete(bobs["url"]).status_code == 200
    assert leftovers(world.service.blobs) == [] or _only_datasets(world)


@pytest.mark.parametrize(
    ("header", "status"),
    [
        ("SHA-256=:{sha256}:", 200),  # algorithm names in any case
        ("sha-512=:{sha512}:", 200),
        ("md5=:AAAA:, sha-256=:{sha256}:", 200),  # an algorithm we do not check is ignored
        ("sha-512=:{other512}:", 422),
        ("sha-256=:{sha256}:, sha-512=:{other512}:", 422),  # every one given is checked
        ("md5=:AAAA:", 400),  # none we check: say so rather than store it unchecked
        ("sha-256=:{sha256}:, " + "x" * 600, 400),
        ("sha-256=:abc:", 400),
        ("sha-256", 400),
    ],
)
def test_the_digests_a_part_carries_are_checked(world: World, header: str, status: int) -> None:
    upload = start(world.alice, len(world.tarball)).get_json()
    part = world.parts(upload)[0]
    values = {
        "sha256": base64.b64encode(hashlib.sha256(part).digest()).decode(),
        "sha512": base64.b64encode(hashlib.sha512(part).digest()).decode(),
        "other512": base64.b64encode(hashlib.sha512(b"other").digest()).decode(),
    }
    answer = put(world.alice, upload["id"], 1, part, **{"Content-Digest": header.format(**values)})
    assert answer.status_code == status, answer.get_json()
    stored = world.alice.get(upload["url"]).get_json()["received"]
    assert stored == ([1] if status == 200 else [])


def test_starts_at_once_cannot_pass_the_open_uploads_limit(world: World) -> None:
    import threading

    world.service.rate_limits = RateLimits(writes=1000)
    app = create_app(world.service)
    token = issue_token(world.service, "carol", "researcher")
    answers: list[int] = []
    barrier = threading.Barrier(8)

    def race() -> None:
        client = signed_in(app.test_client(), token)
        barrier.wait()
        answers.append(start(client, 10).status_code)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [201] * MAX_OPEN_UPLOADS + [429] * (8 - MAX_OPEN_UPLOADS)


def test_unfinished_uploads_are_listed_and_named_when_too_many(world: World) -> None:
    made = []
    for _ in range(MAX_OPEN_UPLOADS):
        world.clock.advance(61)
        made.append(start(world.alice, 10).get_json()["id"])
    listed = world.alice.get("/api/v1/uploads").get_json()["uploads"]
    assert [u["id"] for u in listed] == made
    assert world.bob.get("/api/v1/uploads").get_json()["uploads"] == []
    world.clock.advance(61)
    crowded = start(world.alice, 10).get_json()["error"]
    assert crowded["details"]["uploads"] == made and made[0] in crowded["message"]


def test_an_incomplete_upload_lists_its_missing_parts(world: World) -> None:
    upload = start(world.alice, len(world.tarball)).get_json()
    put(world.alice, upload["id"], 2, world.parts(upload)[1])
    error = submit(world.alice, upload["id"]).get_json()["error"]
    assert error["details"]["missing"] == [1, *range(3, upload["parts"] + 1)]


def test_parts_are_not_writes_for_the_rate_limit(world: World) -> None:
    # writes=3 in this world: a start, every part and a submission pass
    upload = sent_whole(world)
    assert submit(world.alice, upload["id"]).status_code == 201


def test_a_sweep_during_a_long_submission_keeps_its_image(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone starts an upload hours after this one's submission began, while it is still
    being joined and inspected (its lease renewed meanwhile): the sweep must not take the
    image the submission is made of, nor think the request dead."""
    from usecases import uploads as use_cases

    monkeypatch.setattr(use_cases, "LEASE_RENEW_S", 0.01)
    upload = sent_whole(world)
    world.clock.advance(25 * 3600)  # past the last part's day: only a submission keeps it
    real_inspect = use_cases.inspect_image

    def slow_inspection(*args: Any, **kwargs: Any) -> str:
        for _ in range(4):  # two hours in all, the lease renewed as they pass
            world.clock.advance(1800)
            _lease_renewed(world, upload["id"])
        assert start(world.bob, 10).status_code == 201  # bob's start sweeps
        return real_inspect(*args, **kwargs)

    monkeypatch.setattr(use_cases, "inspect_image", slow_inspection)
    made = submit(world.alice, upload["id"])
    assert made.status_code == 201, made.get_json()
    assert stored_image(world.service, made.get_json()["id"]) == world.tarball
    assert world.alice.get(upload["url"]).get_json()["state"] == "submitted"


def _lease_renewed(world: World, upload_id: str) -> None:
    """Wait (bounded) until the lease on ``upload_id`` runs past the clock's time."""
    from store.uploads import Uploads

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        record = Uploads(world.service.db).get(upload_id)
        if record is not None and record.expires_at > world.clock.now():
            return
        time.sleep(0.005)
    raise AssertionError("the lease was not renewed")


def _died_while_submitting(world: World, upload: dict[str, Any], stage: str) -> str | None:
    """Leave ``upload`` as a request killed at ``stage`` of its submission leaves it: rows
    and blobs exactly as written up to there. The model id, when one was made."""
    from store.uploads import Uploads, UploadState
    from usecases.uploads import FINISH_LEASE

    uploads = Uploads(world.service.db)
    record = uploads.get(upload["id"])
    assert record is not None
    lease = world.clock.now() + FINISH_LEASE
    assert uploads.move(record.id, UploadState.RECEIVING, UploadState.FINISHING, expires_at=lease)
    if stage == "joining":
        return None
    world.service.blobs.finish_parts(record.blob_key, record.handle, upload["parts"])
    if stage == "inspecting":
        return None
    from tests.unit.test_api import FIRST_IMAGE_ID
    from usecases.submissions import create_submission, upload_spec

    spec = upload_spec(record.blob_key, FIRST_IMAGE_ID, record.filename, "v1")
    task = world.service.tasks[TASK]
    made = create_submission(
        world.service, task, "big", spec, record.owner_id, idempotency_key="key-1"
    )
    return made.model_id


@pytest.mark.parametrize(
    ("stage", "state"),
    [("joining", "receiving"), ("inspecting", "interrupted"), ("submitted", "submitted")],
)
def test_an_upload_whose_submitting_request_died_is_where_its_owner_can_go_on(
    world: World, stage: str, state: str
) -> None:
    """A server killed during the final submit left the upload "finishing" for two days:
    not submittable, not deletable, not listed, and its joined image never removed (found
    by an outside tester). Once the dead request's lease lapses it is put back."""
    from usecases.uploads import FINISH_LEASE

    upload = sent_whole(world)
    model_id = _died_while_submitting(world, upload, stage)
    busy = submit(world.alice, upload["id"])  # the same key replays a submission made
    assert (
        busy.status_code == 409 and "submitted again after" in busy.get_json()["error"]["message"]
    )
    world.clock.advance(FINISH_LEASE.total_seconds() + 1)
    shown = world.alice.get(upload["url"]).get_json()
    assert (shown["state"], shown["submission"]) == (state, model_id)
    assert shown["received"] == list(range(1, upload["parts"] + 1))
    again = submit(world.alice, upload["id"], "key-1")
    assert again.status_code in (200, 201), again.get_json()
    made = again.get_json()["id"]
    assert model_id in (None, made) and models(world.service) == 1
    assert stored_image(world.service, made) == world.tarball
    assert world.alice.get(upload["url"]).get_json()["state"] == "submitted"


def test_an_interrupted_upload_takes_no_parts_and_is_listed(world: World) -> None:
    from usecases.uploads import FINISH_LEASE

    upload = sent_whole(world)
    _died_while_submitting(world, upload, "inspecting")
    world.clock.advance(FINISH_LEASE.total_seconds() + 1)
    listed = world.alice.get("/api/v1/uploads").get_json()["uploads"]
    assert [(u["id"], u["state"]) for u in listed] == [(upload["id"], "interrupted")]
    answer = put(world.alice, upload["id"], 1, world.parts(upload)[0])
    assert answer.status_code == 409
    assert answer.get_json()["error"]["code"] == "upload_interrupted"


def test_an_interrupted_upload_deleted_or_left_takes_its_joined_image_with_it(
    world: World,
) -> None:
    from store.uploads import Uploads
    from usecases.uploads import FINISH_LEASE, UPLOAD_TTL, sweep_expired

    kept, deleted = sent_whole(world), sent_whole(world)
    keys = {}
    for upload in (kept, deleted):
        _died_while_submitting(world, upload, "inspecting")
        record = Uploads(world.service.db).get(upload["id"])
        assert record is not None
        keys[upload["id"]] = record.blob_key
    world.clock.advance(FINISH_LEASE.total_seconds() + 1)
    assert world.alice.delete(deleted["url"]).status_code == 200
    assert not world.service.blobs.exists(keys[deleted["id"]])
    assert world.alice.get(kept["url"]).get_json()["state"] == "interrupted"
    world.clock.advance(UPLOAD_TTL.total_seconds() + 1)
    assert sweep_expired(world.service) == 1
    assert Uploads(world.service.db).get(kept["id"]) is None
    assert not world.service.blobs.exists(keys[kept["id"]])
    assert leftovers(world.service.blobs) == []


def test_a_sweep_puts_a_dead_submission_back_and_keeps_a_made_ones_image(world: World) -> None:
    from store.uploads import Uploads
    from usecases.uploads import FINISH_LEASE, UPLOAD_TTL, sweep_expired

    upload = sent_whole(world)
    model_id = _died_while_submitting(world, upload, "submitted")
    world.clock.advance(FINISH_LEASE.total_seconds() + 1)
    assert sweep_expired(world.service) == 1
    record = Uploads(world.service.db).get(upload["id"])
    assert record is not None and record.model_id == model_id
    world.clock.advance(UPLOAD_TTL.total_seconds() + 1)
    assert sweep_expired(world.service) == 1
    assert model_id is not None and stored_image(world.service, model_id) == world.tarball


def test_a_failing_sweep_does_not_refuse_a_new_upload(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    start(world.alice, len(world.tarball))
    world.clock.advance(25 * 3600)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError("the store is away")

    monkeypatch.setattr(world.service.blobs, "abort_parts", broken)
    assert start(world.bob, 10).status_code == 201


def test_an_upload_whose_parts_the_store_dropped_can_be_listed_and_deleted(
    world: World,
) -> None:
    from store.uploads import Uploads

    upload = start(world.alice, len(world.tarball)).get_json()
    put(world.alice, upload["id"], 1, world.parts(upload)[0])
    record = Uploads(world.service.db).get(upload["id"])
    assert record is not None
    world.service.blobs.abort_parts(record.blob_key, record.handle)  # a lifecycle rule
    listed = world.alice.get("/api/v1/uploads").get_json()["uploads"]
    assert [(u["id"], u["received"]) for u in listed] == [(upload["id"], [])]
    assert world.alice.delete(upload["url"]).status_code == 200
    assert world.alice.get("/api/v1/uploads").get_json()["uploads"] == []
