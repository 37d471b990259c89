"""The REST API through Flask's test client, on a real Service (SQLite file + blob folder)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from api.app import create_app
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.results import EvaluationResult, Score, ScoreKey
from evaluator.runtimes.specs import DockerSource, DockerSpec
from store.jobs import JobStore
from store.models import JobRow, ModelRow
from tests.unit.auth_helpers import admin_client
from usecases import submissions
from usecases.service import Service
from usecases.submissions import (
    SubmissionRefused,
    UploadTooLarge,
    submit_file,
    submit_reference,
    submit_upload,
)

DOCKER = {"kind": "docker", "image": "registry.example.org/model:1", "protocol": "v1"}
PROCESS = {"kind": "process", "command": ["python", "model.py"], "protocol": "v1"}
URL = {"kind": "url", "url": "http://127.0.0.1:9", "protocol": "v1"}


def make_service(tmp_path: Path, allow_local: bool = False) -> Service:
    return Service.open(tmp_path / "data", allow_local_runtimes=allow_local)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = make_service(tmp_path)
    yield svc
    svc.close()


@pytest.fixture
def app(service: Service) -> Flask:
    return create_app(service)


@pytest.fixture
def client(app: Flask, service: Service) -> FlaskClient:
    """An admin's client (tests/unit/test_auth.py covers the other roles)."""
    return admin_client(app.test_client(), service)


def assert_error(response: Any, status: int, code: str | None = None) -> dict:
    """Every error is JSON ``{"error": {"code", "message"}}`` with the expected status."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.is_json, response.get_data(as_text=True)
    error = response.get_json()["error"]
    assert isinstance(error["code"], str) and error["code"]
    assert isinstance(error["message"], str) and error["message"]
    if code is not None:
        assert error["code"] == code, error
    return error


def stored_rows(service: Service) -> tuple[int, int]:
    with service.db.session() as session:
        return session.query(ModelRow).count(), session.query(JobRow).count()


def finished(service: Service, name: str, axes: dict[str, float], task: str = "sentiment") -> str:
    """A submission finished through the store with a hand-made result."""
    model_id, job_id = service.store.submit(task, name, DOCKER)
    claimed = service.store.claim("seed-worker", 60)
    assert claimed is not None and claimed.id == job_id
    key = ScoreKey(task, "r1", "test", "h" * 64, metric="macro_f1")
    result = EvaluationResult(
        task=task,
        status="done",
        summary={**axes, "metric": "macro_f1"},
        rounds=[{"round": "r1", "performance": axes["performance"], "performance_ci": None}],
        scores=[Score(key, axes["performance"], 84)],
        provenance={"code_version": "test", "dataset_hashes": {"r1/test": "h" * 64}},
    )
    assert service.store.finish(job_id, "seed-worker", result, lease=claimed.lease)
    return model_id


# Model a: better performance, much more memory. Model b: the reverse.
AXES_A = {
    "performance": 90.0,
    "throughput": 100.0,
    "memory": 1.5,
    "robustness": 90.0,
    "fairness": 90.0,
}
AXES_B = {
    "performance": 60.0,
    "throughput": 100.0,
    "memory": 0.1,
    "robustness": 90.0,
    "fairness": 90.0,
}


# -- tasks -----------------------------------------------------------------------------------
def test_health(client: FlaskClient) -> None:
    body = client.get("/api/v1/health").get_json()
    assert body["status"] == "ok" and body["jobs"] == {}


def test_list_and_get_tasks(client: FlaskClient) -> None:
    tasks = client.get("/api/v1/tasks").get_json()["tasks"]
    names = {t["name"] for t in tasks}
    assert {"sentiment", "nli", "qa", "hate_speech"} <= names
    sentiment = client.get("/api/v1/tasks/sentiment").get_json()
    assert sentiment["name"] == "sentiment"
    assert [r["name"] for r in sentiment["rounds"]] == ["r1", "r2", "r3"]
    assert "limits" in sentiment and "weights" in sentiment
    assert set(sentiment["output"]["labels"]) == {"positive", "negative", "neutral"}


def test_unknown_task_is_a_json_404(client: FlaskClient) -> None:
    error = assert_error(client.get("/api/v1/tasks/nope"), 404, "unknown_task")
    assert "nope" in error["message"] and "sentiment" in error["message"]
    assert_error(client.get("/api/v1/tasks/nope/leaderboard"), 404, "unknown_task")
    assert_error(client.post("/api/v1/tasks/nope/submissions", json={}), 404, "unknown_task")
    assert_error(client.get("/api/v1/submissions?task=nope"), 404, "unknown_task")


def test_unknown_route_and_method_are_json(client: FlaskClient) -> None:
    assert_error(client.get("/api/v1/no/such/route"), 404)
    assert_error(client.delete("/api/v1/tasks"), 405)


def test_root_redirects_to_the_tasks_and_no_placeholder_leaderboard_page(
    client: FlaskClient,
) -> None:
    response = client.get("/")
    assert response.status_code == 302 and response.location == "/api/v1/tasks"
    assert_error(client.get("/leaderboard/sentiment"), 404)


def test_openapi_lists_every_route(app: Flask, client: FlaskClient) -> None:
    spec = client.get("/api/v1/openapi.json").get_json()
    documented = set(spec["paths"])
    routes = {
        rule.rule.replace("<", "{").replace(">", "}")
        for rule in app.url_map.iter_rules()
        if rule.endpoint.startswith("v1.")
    }
    assert routes, "no v1 routes registered"
    assert routes <= documented, routes - documented
    assert "post" in spec["paths"]["/api/v1/tasks/{task_name}/submissions"]


# -- submit (JSON) ---------------------------------------------------------------------------
def test_submit_docker_reference(client: FlaskClient, service: Service) -> None:
    response = client.post(
        "/api/v1/tasks/sentiment/submissions", json={"name": "my model-1.0", "runtime": DOCKER}
    )
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    assert body["status"] == "queued" and body["task"] == "sentiment"
    assert body["url"] == f"/api/v1/submissions/{body['id']}"
    found = client.get(body["url"]).get_json()
    assert found["job"]["status"] == "queued" and found["job"]["progress"] == 0.0
    assert found["runtime"] == DOCKER and found["results"] is None
    assert stored_rows(service) == (1, 1)


def test_docker_reference_is_stored_as_a_registry_source(
    client: FlaskClient, service: Service
) -> None:
    runtime = {**DOCKER, "image": "registry.example.org/model@sha256:" + "a" * 64}
    response = client.post(
        "/api/v1/tasks/sentiment/submissions", json={"name": "m", "runtime": runtime}
    )
    assert response.status_code == 201, response.get_json()
    with service.db.session() as session:
        model = session.get(ModelRow, response.get_json()["id"])
    assert model.runtime == {
        "kind": "docker",
        "source": "registry",
        "image": "registry.example.org/model@sha256:" + "a" * 64,
        "protocol": "v1",
    }


@pytest.mark.parametrize(
    ("image", "needle"),
    [
        ("./model.tar", "path"),
        ("/var/lib/images/model.tar", "path"),
        ("~/model.tar", "path"),
        ("../model", "path"),
        ("sha256:" + "0" * 64, "sha256:"),
        ("registry.example.org/my model:1", "spaces"),
    ],
)
def test_docker_json_submission_takes_only_registry_references(
    client: FlaskClient, service: Service, image: str, needle: str
) -> None:
    response = client.post(
        "/api/v1/tasks/sentiment/submissions",
        json={"name": "m", "runtime": {**DOCKER, "image": image}},
    )
    error = assert_error(response, 422, "invalid_submission")
    assert needle in error["message"] and len(error["message"].split()) > 3  # a sentence
    assert stored_rows(service) == (0, 0)


@pytest.mark.parametrize("source", ["local", "upload", "registry"])
def test_a_json_submission_cannot_choose_its_source(
    client: FlaskClient, service: Service, source: str
) -> None:
    response = client.post(
        "/api/v1/tasks/sentiment/submissions",
        json={"name": "m", "runtime": {**DOCKER, "source": source}},
    )
    assert "source" in assert_error(response, 422)["message"]
    assert stored_rows(service) == (0, 0)


@pytest.mark.parametrize("runtime", [PROCESS, URL], ids=["process", "url"])
def test_local_runtimes_refused_by_default(
    client: FlaskClient, service: Service, runtime: dict
) -> None:
    response = client.post(
        "/api/v1/tasks/sentiment/submissions", json={"name": "m", "runtime": runtime}
    )
    assert_error(response, 403, "runtime_not_allowed")
    assert stored_rows(service) == (0, 0)


@pytest.mark.parametrize("runtime", [PROCESS, URL], ids=["process", "url"])
def test_local_runtimes_accepted_when_allowed(tmp_path: Path, runtime: dict) -> None:
    service = make_service(tmp_path, allow_local=True)
    try:
        client = admin_client(create_app(service).test_client(), service)
        response = client.post(
            "/api/v1/tasks/sentiment/submissions", json={"name": "m", "runtime": runtime}
        )
        assert response.status_code == 201, response.get_json()
        incomplete = {"kind": runtime["kind"], "protocol": "v1"}  # no command / url
        assert_error(
            client.post(
                "/api/v1/tasks/sentiment/submissions", json={"name": "m", "runtime": incomplete}
            ),
            422,
        )
    finally:
        service.close()


def test_blob_in_a_json_submission_is_refused(client: FlaskClient) -> None:
    # the schema has no `blob` field, so a client cannot point a job at someone's upload
    response = client.post(
        "/api/v1/tasks/sentiment/submissions",
        json={"name": "m", "runtime": {**DOCKER, "blob": "uploads/x.tar"}},
    )
    assert_error(response, 422)


BAD_BODIES = [
    ({"runtime": DOCKER}, "name"),
    ({"name": "m"}, "runtime"),
    ({"name": "", "runtime": DOCKER}, "name"),
    ({"name": "../../etc", "runtime": DOCKER}, "name"),
    ({"name": "ü" * 5, "runtime": DOCKER}, "name"),
    ({"name": "x" * 10_000, "runtime": DOCKER}, "name"),
    ({"name": 12, "runtime": DOCKER}, "name"),
    ({"name": "m", "runtime": "docker"}, "runtime"),
    ({"name": "m", "runtime": {"kind": "vm"}}, "runtime"),
    ({"name": "m", "runtime": {**DOCKER, "protocol": "v9"}}, "runtime"),
    ({"name": "m", "runtime": {"kind": "docker", "protocol": "v1"}}, "image"),
    ({"name": "m", "runtime": {**DOCKER, "image": ""}}, "image"),
    ({"name": "m", "runtime": DOCKER, "extra": 1}, "extra"),
    ({"name": "m", "runtime": {**DOCKER, "command": "rm -rf /"}}, "runtime"),
]


@pytest.mark.parametrize(("body", "field"), BAD_BODIES)
def test_schema_errors_are_422(
    client: FlaskClient, service: Service, body: dict, field: str
) -> None:
    error = assert_error(client.post("/api/v1/tasks/sentiment/submissions", json=body), 422)
    assert field in error["message"]
    assert stored_rows(service) == (0, 0)


@pytest.mark.parametrize(
    ("data", "content_type"),
    [
        (b"{not json", "application/json"),
        (b"", "application/json"),
        (b"", None),
        (b"[1, 2]", "application/json"),
        (b'"a string"', "application/json"),
        (b"null", "application/json"),
        (b'{"name": "m"}', "text/plain"),
        (b"\xff\xfe\x00garbage", "application/json"),
        (b"name=m", "application/x-www-form-urlencoded"),
    ],
)
def test_bad_bodies_are_400_json(
    client: FlaskClient, service: Service, data: bytes, content_type: str | None
) -> None:
    response = client.post(
        "/api/v1/tasks/sentiment/submissions", data=data, content_type=content_type
    )
    assert_error(response, 400, "bad_json")
    assert stored_rows(service) == (0, 0)


# -- submit (multipart upload) ---------------------------------------------------------------
def upload(client: FlaskClient, payload: bytes, **form: str) -> Any:
    data: dict[str, Any] = {"name": "uploaded", "protocol": "v1", **form}
    data["image"] = (io.BytesIO(payload), "model.tar")
    return client.post(
        "/api/v1/tasks/sentiment/submissions", data=data, content_type="multipart/form-data"
    )


def image_config(index: int = 0) -> tuple[str, bytes]:
    """Image ``index``'s config and its file name: its digest, the image ID, as `docker
    save` names it."""
    data = json.dumps({"os": "linux", "index": index}).encode()
    return hashlib.sha256(data).hexdigest() + ".json", data


FIRST_IMAGE_ID = "sha256:" + image_config(0)[0].removesuffix(".json")  # image_tar()'s


def image_tar(images: int = 1) -> bytes:
    """A minimal `docker save` layout: manifest.json, an image config, one layer each."""
    members: dict[str, bytes] = {}
    manifest = []
    for index in range(images):
        config, members[config] = image_config(index)
        members[f"layer{index}/layer.tar"] = b"\0" * 1024
        manifest.append(
            {"Config": config, "RepoTags": [f"m{index}:1"], "Layers": [f"layer{index}/layer.tar"]}
        )
    members["manifest.json"] = json.dumps(manifest).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_upload_stores_the_tarball_in_blobs(client: FlaskClient, service: Service) -> None:
    tarball = image_tar()
    response = upload(client, tarball)
    assert response.status_code == 201, response.get_json()
    keys = list(service.blobs.keys("uploads/"))
    assert len(keys) == 1 and service.blobs.get_bytes(keys[0]) == tarball
    with service.db.session() as session:
        model = session.get(ModelRow, response.get_json()["id"])
    assert model.runtime["blob"] == keys[0] and model.runtime["kind"] == "docker"
    assert model.runtime["source"] == "upload"
    assert model.image_id == FIRST_IMAGE_ID  # pinned from the manifest at upload
    shown = client.get(f"/api/v1/submissions/{model.id}").get_json()
    assert "blob" not in shown["runtime"]  # storage keys are not exposed


@pytest.mark.parametrize(
    ("payload", "problem"),
    [(b"tar bytes" * 100, "corrupt"), (image_tar(images=2), "holds 2 images")],
)
def test_corrupt_or_multi_image_upload_is_422_and_nothing_stored(
    client: FlaskClient, service: Service, payload: bytes, problem: str
) -> None:
    body = assert_error(upload(client, payload), 422, "image_not_loadable")
    assert problem in body["message"]
    assert _no_files(Path(service.blobs.root)) == []
    assert stored_rows(service) == (0, 0)


def test_empty_upload_is_422_and_nothing_stored(client: FlaskClient, service: Service) -> None:
    assert_error(upload(client, b""), 422, "invalid_submission")
    assert list(service.blobs.keys()) == []
    assert stored_rows(service) == (0, 0)


def test_upload_without_image_or_with_bad_form_is_422(
    client: FlaskClient, service: Service
) -> None:
    response = client.post(
        "/api/v1/tasks/sentiment/submissions",
        data={"name": "m"},
        content_type="multipart/form-data",
    )
    assert_error(response, 422, "invalid_submission")
    assert_error(upload(client, b"x", name="bad/name"), 422)
    assert_error(upload(client, b"x", protocol="v7"), 422)
    assert stored_rows(service) == (0, 0)
    assert list(service.blobs.keys()) == []


def _no_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_upload_over_the_task_limit_is_413_and_nothing_stored(service: Service) -> None:
    task = service.tasks["sentiment"]
    tarball = image_tar()
    limits = dataclasses.replace(task.limits, max_image_bytes=len(tarball))
    service.tasks["sentiment"] = dataclasses.replace(task, limits=limits)
    client = admin_client(create_app(service).test_client(), service)
    assert_error(upload(client, b"x" * 200_000), 413, "image_too_large")
    assert _no_files(Path(service.blobs.root)) == []  # no blob, no temporary file
    assert stored_rows(service) == (0, 0)
    assert upload(client, tarball).status_code == 201  # exactly the limit is fine


def test_body_over_max_content_length_is_413_json(app: Flask, service: Service) -> None:
    app.config["MAX_CONTENT_LENGTH"] = 1024
    assert_error(upload(admin_client(app.test_client(), service), b"x" * 10_000), 413)
    assert stored_rows(service) == (0, 0)


# -- the submission service (usecases.submissions) ------------------------------------------------
def _refused(call: Any, code: str) -> SubmissionRefused:
    with pytest.raises(SubmissionRefused) as caught:
        call()
    assert caught.value.code == code and caught.value.message
    return caught.value


def test_service_upload_is_stored_inspected_and_queued(service: Service) -> None:
    tarball = image_tar()
    task = service.tasks["sentiment"]
    submitted = submit_upload(service, task, "m", io.BytesIO(tarball), filename="model.tar")
    assert isinstance(submitted.spec, DockerSpec) and submitted.name == "m"
    assert submitted.spec.source is DockerSource.UPLOAD and submitted.spec.image == "model.tar"
    assert submitted.spec.image_id == FIRST_IMAGE_ID
    assert service.blobs.get_bytes(submitted.spec.blob or "") == tarball
    with service.db.session() as session:
        model = session.get(ModelRow, submitted.model_id)
    assert model.runtime == submitted.spec.to_dict()
    assert model.image_id == submitted.spec.image_id


@pytest.mark.parametrize("failure", [RuntimeError("database down"), KeyboardInterrupt()])
def test_service_failure_after_storing_leaves_no_blob(
    service: Service, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, failure: BaseException
) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise failure

    monkeypatch.setattr(JobStore, "submit", fail)
    task = service.tasks["sentiment"]
    tarball = tmp_path / "model.tar"
    tarball.write_bytes(image_tar())
    with pytest.raises(type(failure)):
        submit_upload(service, task, "m", io.BytesIO(image_tar()))
    with pytest.raises(type(failure)):
        submit_file(service, task, "m", tarball)
    assert _no_files(Path(service.blobs.root)) == []


def test_service_interrupted_inspection_leaves_no_blob(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(submissions, "inspect_tarball", interrupted)
    with pytest.raises(KeyboardInterrupt):
        submit_upload(service, service.tasks["sentiment"], "m", io.BytesIO(image_tar()))
    assert _no_files(Path(service.blobs.root)) == []
    assert stored_rows(service) == (0, 0)


@pytest.mark.parametrize(
    ("payload", "code"),
    [(b"", "invalid_submission"), (b"junk" * 100, "image_not_loadable")],
    ids=["empty", "corrupt"],
)
def test_service_refused_upload_leaves_nothing(service: Service, payload: bytes, code: str) -> None:
    task = service.tasks["sentiment"]
    _refused(lambda: submit_upload(service, task, "m", io.BytesIO(payload)), code)
    assert _no_files(Path(service.blobs.root)) == []
    assert stored_rows(service) == (0, 0)


def test_service_oversized_upload_is_refused_while_streaming(service: Service) -> None:
    task = service.tasks["sentiment"]
    limits = dataclasses.replace(task.limits, max_image_bytes=1000)
    task = dataclasses.replace(task, limits=limits)
    stream = io.BytesIO(b"x" * 5_000_000)
    with pytest.raises(UploadTooLarge) as caught:
        submit_upload(service, task, "m", stream)
    assert caught.value.code == "image_too_large"
    assert stream.tell() < 5_000_000  # it stopped reading: the upload was never read whole
    assert _no_files(Path(service.blobs.root)) == []  # no blob, no temporary file


def test_service_refuses_a_broken_file_before_copying_it(service: Service, tmp_path: Path) -> None:
    broken = tmp_path / "two images.tar"
    broken.write_bytes(image_tar(images=2))
    task = service.tasks["sentiment"]
    error = _refused(lambda: submit_file(service, task, "m", broken), "image_not_loadable")
    assert "holds 2 images" in error.message
    assert _no_files(Path(service.blobs.root)) == []
    assert stored_rows(service) == (0, 0)


def test_service_reference_is_a_registry_spec_and_paths_are_refused(service: Service) -> None:
    task = service.tasks["sentiment"]
    submitted = submit_reference(service, task, "m", "registry.example.org/model:1", "v1")
    assert submitted.spec == DockerSpec(
        source=DockerSource.REGISTRY, image="registry.example.org/model:1", protocol="v1"
    )
    error = _refused(lambda: submit_reference(service, task, "m", "./x.tar"), "invalid_submission")
    assert "path" in error.message
    assert stored_rows(service) == (1, 1)


# -- submissions and results -----------------------------------------------------------------
def test_unknown_submission_is_404(client: FlaskClient) -> None:
    assert_error(client.get("/api/v1/submissions/nope"), 404, "unknown_submission")
    assert_error(client.get("/api/v1/submissions/nope/scores"), 404, "unknown_submission")


def test_submission_status_progress_results_and_scores(
    client: FlaskClient, service: Service
) -> None:
    model_id = finished(service, "a", AXES_A)
    body = client.get(f"/api/v1/submissions/{model_id}").get_json()
    assert body["job"]["status"] == "done" and body["job"]["progress"] == 1.0
    assert body["results"]["performance"] == 90.0
    assert body["results"]["rounds"][0]["round"] == "r1"
    assert body["job"]["attempt_history"][0]["outcome"] == "done"
    scores = client.get(f"/api/v1/submissions/{model_id}/scores").get_json()
    assert scores["id"] == model_id and len(scores["scores"]) == 1
    assert scores["scores"][0]["dataset_hash"] == "h" * 64


def test_running_submission_shows_progress(client: FlaskClient, service: Service) -> None:
    model_id, job_id = service.store.submit("sentiment", "m", DOCKER)
    claimed = service.store.claim("w", 60)
    assert claimed is not None and claimed.id == job_id
    assert service.store.heartbeat(
        job_id, "w", 60, 0.5, "round r2 / test: typo", lease=claimed.lease
    )
    job = client.get(f"/api/v1/submissions/{model_id}").get_json()["job"]
    assert (job["status"], job["progress"], job["stage"]) == (
        "running",
        0.5,
        "round r2 / test: typo",
    )
    scores = client.get(f"/api/v1/submissions/{model_id}/scores").get_json()
    assert scores["scores"] == []


def test_failed_submission_shows_code_message_and_log(
    client: FlaskClient, service: Service
) -> None:
    from configs.vocabulary.results import Failure
    from worker.lifecycle import settle_failure

    model_id, job_id = service.store.submit("sentiment", "m", DOCKER)
    claimed = service.store.claim("w", 60)
    assert claimed is not None and claimed.id == job_id
    settle_failure(
        service.store,
        claimed,
        "w",
        Failure(FailureCode.NEVER_HEALTHY, "no /health in 60 s", "boot...\n"),
    )
    failure = client.get(f"/api/v1/submissions/{model_id}").get_json()["job"]["failure"]
    assert failure == {
        "code": "never_healthy",
        "message": "no /health in 60 s",
        "log_tail": "boot...\n",
    }


def test_list_submissions(client: FlaskClient, service: Service) -> None:
    finished(service, "a", AXES_A)
    service.store.submit("nli", "n", DOCKER)
    every = client.get("/api/v1/submissions").get_json()["submissions"]
    assert {s["name"] for s in every} == {"a", "n"}
    mine = client.get("/api/v1/submissions?task=nli").get_json()["submissions"]
    assert [s["name"] for s in mine] == ["n"]
    per_task = client.get("/api/v1/tasks/sentiment/submissions").get_json()["submissions"]
    assert [s["name"] for s in per_task] == ["a"]
    assert len(client.get("/api/v1/submissions?limit=1").get_json()["submissions"]) == 1
    for bad in ("0", "-1", "abc", "1e3", "99999999999999999999999"):
        assert_error(client.get(f"/api/v1/submissions?limit={bad}"), 422)


# -- leaderboard -----------------------------------------------------------------------------
def test_empty_leaderboard(client: FlaskClient) -> None:
    board = client.get("/api/v1/tasks/sentiment/leaderboard").get_json()
    assert board["models"] == [] and board["unranked"] == []
    assert board["rounds"] == ["r1", "r2", "r3"]


def test_leaderboard_default_weights(client: FlaskClient, service: Service) -> None:
    finished(service, "a", AXES_A)
    finished(service, "b", AXES_B)
    board = client.get("/api/v1/tasks/sentiment/leaderboard").get_json()
    assert board["weights"] == {k: float(v) for k, v in service.tasks["sentiment"].weights.items()}
    assert [m["rank"] for m in board["models"]] == [1, 2]
    for entry in board["models"]:
        assert isinstance(entry["dynascore"], float)
        assert entry["rounds"][0]["round"] == "r1"
        assert set(entry["units"]) == {
            "performance",
            "throughput",
            "memory",
            "robustness",
            "fairness",
        }


def test_leaderboard_ranking_follows_the_weights(client: FlaskClient, service: Service) -> None:
    a = finished(service, "a", AXES_A)
    b = finished(service, "b", AXES_B)
    url = "/api/v1/tasks/sentiment/leaderboard"

    def order(query: str) -> list[str]:
        return [m["model_id"] for m in client.get(url + query).get_json()["models"]]

    assert order("?weights=performance:4,memory:0") == [a, b]
    assert order("?weights=performance:1,memory:100") == [b, a]
    named = client.get(url + "?weights=performance:4,memory:0").get_json()["weights"]
    assert named["performance"] == 4.0 and named["memory"] == 0.0
    assert named["throughput"] == service.tasks["sentiment"].weights["throughput"]


def test_leaderboard_instance_memory(client: FlaskClient, service: Service) -> None:
    finished(service, "a", AXES_A)
    finished(service, "b", AXES_B)
    board = client.get("/api/v1/tasks/sentiment/leaderboard?instance_memory=64").get_json()
    assert board["instance_memory_gib"] == 64.0


def test_leaderboard_lists_incomplete_results_as_unranked(
    client: FlaskClient, service: Service
) -> None:
    finished(service, "a", AXES_A)
    finished(service, "partial", {**AXES_B, "fairness": None})  # type: ignore[dict-item]
    board = client.get("/api/v1/tasks/sentiment/leaderboard").get_json()
    assert [m["name"] for m in board["models"]] == ["a"]
    assert board["unranked"][0]["name"] == "partial"
    assert "fairness" in board["unranked"][0]["reason"]


@pytest.mark.parametrize(
    "weights",
    [
        "speed:1",  # unknown axis
        "performance:-1",  # negative
        "performance:abc",  # not a number
        "performance",  # no value
        "performance:0,throughput:0,memory:0,robustness:0,fairness:0",  # all zero
        "performance:nan",
        "performance:inf",
        "performance:1e400",
        "performance:1,performance:2",
        "ü:1",
    ],
)
def test_bad_weights_are_400(client: FlaskClient, service: Service, weights: str) -> None:
    finished(service, "a", AXES_A)
    response = client.get("/api/v1/tasks/sentiment/leaderboard", query_string={"weights": weights})
    assert_error(response, 400, "bad_weights")


@pytest.mark.parametrize("memory", ["0", "-1", "abc", "nan", "inf", "1e400", ""])
def test_bad_instance_memory_is_422(client: FlaskClient, service: Service, memory: str) -> None:
    response = client.get(
        "/api/v1/tasks/sentiment/leaderboard", query_string={"instance_memory": memory}
    )
    assert_error(response, 422)


@pytest.mark.parametrize(
    "query",
    [
        {"weights": "performance:1e308,throughput:1e308"},
        {"weights": "performance:" + "9" * 400},
        {"weights": "," * 1000},
        {"instance_memory": "1e308"},
        {"instance_memory": "0.0000001"},
        {"weights": "performance:4", "extra": "ignored?"},
    ],
)
def test_fuzzed_leaderboard_queries_never_500(
    client: FlaskClient, service: Service, query: dict
) -> None:
    finished(service, "a", AXES_A)
    finished(service, "b", AXES_B)
    response = client.get("/api/v1/tasks/sentiment/leaderboard", query_string=query)
    assert response.status_code < 500, response.get_data(as_text=True)
    assert response.is_json
    if response.status_code >= 400:
        assert_error(response, response.status_code)


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/tasks/" + "x" * 5000,
        "/api/v1/tasks/%F0%9F%98%80",
        "/api/v1/submissions/" + "ü" * 300,
        "/api/v1/submissions/%00",
        "/api/v1/tasks/sentiment/leaderboard?weights=%00",
    ],
)
def test_fuzzed_paths_never_500(client: FlaskClient, path: str) -> None:
    response = client.get(path)
    assert 400 <= response.status_code < 500
    assert_error(response, response.status_code)


def test_fuzzed_submissions_never_500(client: FlaskClient, service: Service) -> None:
    url = "/api/v1/tasks/sentiment/submissions"
    bodies: list[Any] = [
        {"name": "m", "runtime": {**DOCKER, "image": "x" * 100_000}},
        {"name": "m", "runtime": {**DOCKER, "image": 10**400}},
        {"name": "m" * 128, "runtime": DOCKER},
        {"name": "m", "runtime": {"kind": ["docker"]}},
        {"name": "m", "runtime": {"kind": None}},
        {"name": None, "runtime": None},
        {"name": "m", "runtime": {**DOCKER, "protocol": None}},
        {"name": "🙂", "runtime": DOCKER},
        {"": ""},
        {},
    ]
    for body in bodies:
        response = client.post(url, json=body)
        assert response.status_code in (201, 400, 413, 422), (body, response.get_data(as_text=True))
        if response.status_code != 201:
            assert_error(response, response.status_code)
    deep = "[" * 10_000 + "]" * 10_000
    response = client.post(url, data=deep, content_type="application/json")
    assert 400 <= response.status_code < 500
    assert_error(response, response.status_code)


def test_a_large_json_body_is_413_and_nothing_stored(client: FlaskClient, service: Service) -> None:
    """Only uploads may be large; a JSON body is read into memory, so it is capped."""
    body = json.dumps(
        {"name": "m", "runtime": {"kind": "docker", "image": "x/y:1"}, "pad": "x" * 100_000}
    )
    response = client.post(
        "/api/v1/tasks/sentiment/submissions", data=body, content_type="application/json"
    )
    assert_error(response, 413, "body_too_large")
    assert stored_rows(service) == (0, 0)
