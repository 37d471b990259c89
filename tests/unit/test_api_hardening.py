"""Hardening of the shared service: crafted tarballs, gzip bombs, error headers, schema and
server agreeing, names, references that can never run, registries on local networks and
what response headers and bodies give away."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import re
import socket
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from test_api import (
    DOCKER,
    _no_files,
    assert_error,
    finished,
    image_tar,
    make_service,
    stored_rows,
    upload,
)
from werkzeug.exceptions import TooManyRequests

from api import errors
from api.app import create_app
from api.errors import ApiError
from api.schemas import WEIGHTS_PATTERN
from api.server import SERVER_BANNER, make_api_server
from evaluator.runtimes.docker import tarballs
from evaluator.runtimes.docker.references import check_registry_address, parse_ip_host
from store.accounts import Accounts
from tests.unit.auth_helpers import admin_client, issue_token, signed_in
from usecases.service import Service
from usecases.submissions import SubmissionRefused, submit_reference

SUBMIT = "/api/v1/tasks/sentiment/submissions"
CONFIG_BYTES = b'{"os": "linux"}'
CONFIG_DIGEST = hashlib.sha256(CONFIG_BYTES).hexdigest()  # the image ID
CONFIG = CONFIG_DIGEST + ".json"
AXES_A = {"performance": 90.0, "throughput": 100.0, "memory": 1.5, "robustness": 90.0}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = make_service(tmp_path)
    yield svc
    svc.close()


@pytest.fixture
def client(service: Service) -> FlaskClient:
    """An admin's client (the roles are tests/unit/test_auth.py's)."""
    return admin_client(create_app(service).test_client(), service)


def docker_tar(manifest: bytes, config: str = CONFIG, padding: int = 0) -> bytes:
    """A `docker save` layout around a given manifest.json; ``padding`` zero bytes after the
    archive's end (a bomb hides there)."""
    members = {config: CONFIG_BYTES, "layer/layer.tar": b"\0" * 1024, "manifest.json": manifest}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue() + bytes(padding)


def entry(**fields: Any) -> bytes:
    return json.dumps([{"Config": CONFIG, "Layers": ["layer/layer.tar"], **fields}]).encode()


def limited(service: Service, limit: int) -> FlaskClient:
    """An admin client of ``service`` whose sentiment task takes images up to ``limit``."""
    task = service.tasks["sentiment"]
    limits = dataclasses.replace(task.limits, max_image_bytes=limit)
    service.tasks["sentiment"] = dataclasses.replace(task, limits=limits)
    return admin_client(create_app(service).test_client(), service)


def assert_nothing_stored(service: Service) -> None:
    assert _no_files(Path(service.blobs.root)) == []
    assert stored_rows(service) == (0, 0)


# -- 1. crafted manifests ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "payload",
    [
        docker_tar(entry(RepoTags=5)),
        docker_tar(entry(RepoTags=[1, 2])),
        docker_tar(entry(Layers=5)),
        docker_tar(entry(Layers="layer/layer.tar")),
        docker_tar(entry(Config=7)),
        docker_tar(b"[" * 100_000 + b"]" * 100_000),  # RecursionError in the decoder
        docker_tar(b'[{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"]"),
        # a 305-character config name would be a 305-character image_id (a 128 column)
        docker_tar(entry(Config="c" * 300 + ".json"), config="c" * 300 + ".json"),
        docker_tar(entry(Config="not-a-digest.json"), config="not-a-digest.json"),
    ],
    ids=[
        "repotags-number",
        "repotags-numbers",
        "layers-number",
        "layers-string",
        "config-number",
        "deep-list",
        "deep-object",
        "long-config",
        "config-no-digest",
    ],
)
def test_crafted_manifests_are_422_and_nothing_stored(
    client: FlaskClient, service: Service, payload: bytes
) -> None:
    assert_error(upload(client, payload), 422, "image_not_loadable")
    assert_nothing_stored(service)


def test_an_oci_layout_config_name_is_an_image_id(client: FlaskClient, service: Service) -> None:
    config = "blobs/sha256/" + CONFIG_DIGEST
    response = upload(client, docker_tar(entry(Config=config, RepoTags=None), config=config))
    assert response.status_code == 201, response.get_json()
    shown = client.get(response.get_json()["url"]).get_json()
    assert shown["image_id"] == "sha256:" + CONFIG_DIGEST


def test_a_config_under_another_images_id_is_422_and_nothing_stored(
    client: FlaskClient, service: Service
) -> None:
    """A config named as another image (its digest is not its name) made a submission that
    bore the other image's ID; the worker then kept the image it loaded (outside tester)."""
    spoofed = "d2" * 32 + ".json"
    response = upload(client, docker_tar(entry(Config=spoofed), config=spoofed))
    assert_error(response, 422, "image_not_loadable")
    assert "does not hash to" in response.get_json()["error"]["message"]
    assert_nothing_stored(service)


# -- 2. gzip bombs ----------------------------------------------------------------------------
LIMIT = 1024**2
BOMB = 16 * LIMIT  # 16 MiB of zeros: ~16 KiB compressed


@pytest.fixture
def decompressed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many bytes the inspection took out of the decompressor (the work a bomb forces)."""
    taken = [0]
    original = tarballs._decompressed

    class Counting:
        def __init__(self, raw: Any) -> None:
            self.raw = raw

        def read(self, size: int = -1) -> bytes:
            data = self.raw.read(size)
            taken[0] += len(data)
            return data

        def seek(self, offset: int, whence: int = 0) -> int:
            before = self.raw.tell()
            position = self.raw.seek(offset, whence)
            taken[0] += max(0, position - before)
            return position

        def tell(self) -> int:
            return self.raw.tell()

        def __enter__(self) -> Counting:
            return self

        def __exit__(self, *exc: object) -> None:
            self.raw.close()

    monkeypatch.setattr(tarballs, "_decompressed", lambda path: Counting(original(path)))
    return taken


def test_a_gzip_bomb_is_refused_from_its_trailer_without_decompressing(
    service: Service, decompressed: list[int]
) -> None:
    bomb = gzip.compress(docker_tar(entry(), padding=BOMB), compresslevel=1)
    assert len(bomb) < LIMIT
    assert_error(upload(limited(service, LIMIT), bomb), 413, "image_too_large")
    assert decompressed[0] == 0
    assert_nothing_stored(service)


@pytest.mark.parametrize("where", ["after-the-archive", "in-a-layer"])
def test_a_gzip_bomb_with_a_forged_trailer_stops_at_the_limit(
    service: Service, decompressed: list[int], where: str
) -> None:
    """The trailer says 1 KiB; decompression stops one byte past the limit, not at 16 MiB."""
    if where == "in-a-layer":
        # every member fits and so does their sum; with the headers the stream does not
        layer = LIMIT - 1000
        members = {CONFIG: CONFIG_BYTES, "layer/layer.tar": bytes(layer), "manifest.json": entry()}
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
        tar = buffer.getvalue()
    else:
        tar = docker_tar(entry(), padding=BOMB)
    bomb = bytearray(gzip.compress(tar, compresslevel=1))
    bomb[-4:] = (1024).to_bytes(4, "little")
    response = upload(limited(service, LIMIT), bytes(bomb))
    assert_error(response, 413, "image_too_large")
    assert 0 < decompressed[0] <= LIMIT + 1
    assert_nothing_stored(service)


def test_a_compressed_image_within_the_limit_is_accepted(service: Service) -> None:
    tar = docker_tar(entry())
    client = limited(service, len(tar))  # the unpacked stream is exactly the limit
    assert upload(client, gzip.compress(tar)).status_code == 201
    assert_error(upload(client, gzip.compress(tar + bytes(512))), 413, "image_too_large")


# -- 3. error headers -------------------------------------------------------------------------
def test_405_carries_allow(client: FlaskClient) -> None:
    response = client.delete("/api/v1/tasks")
    assert_error(response, 405, "method_not_allowed")
    assert set(response.headers["Allow"].replace(" ", "").split(",")) >= {"GET", "HEAD"}
    assert response.mimetype == "application/json"


def test_error_headers_are_kept_for_429s() -> None:
    app = Flask(__name__)
    errors.install(app)

    @app.route("/werkzeug")
    def werkzeug_429() -> str:
        raise TooManyRequests(retry_after=7)

    @app.route("/api")
    def api_429() -> str:
        raise ApiError(429, "too_many_requests", "slow down", headers={"Retry-After": "9"})

    for path, wait in (("/werkzeug", "7"), ("/api", "9")):
        response = app.test_client().get(path)
        assert_error(response, 429, "too_many_requests")
        assert response.headers["Retry-After"] == wait


# -- 4. the schema and the server agree -------------------------------------------------------
@pytest.fixture
def spec(client: FlaskClient) -> dict[str, Any]:
    return client.get("/api/v1/openapi.json").get_json()


def _parameter(spec: dict[str, Any], name: str) -> dict[str, Any]:
    params = spec["paths"]["/api/v1/tasks/{task_name}/leaderboard"]["get"]["parameters"]
    return next(p["schema"] for p in params if p["name"] == name)


def test_instance_memory_is_documented_exclusive(spec: dict[str, Any], client: FlaskClient) -> None:
    schema = _parameter(spec, "instance_memory")
    assert schema["minimum"] == 0 and schema["exclusiveMinimum"] is True
    board = "/api/v1/tasks/sentiment/leaderboard"
    assert_error(client.get(board, query_string={"instance_memory": "0"}), 422)
    assert client.get(board, query_string={"instance_memory": "0.001"}).status_code == 200


@pytest.mark.parametrize(
    "weights",
    [
        "performance:4,memory:0",
        " performance : 4 , fairness:.5",
        "performance:1e3",
        "",
        "performance:4_0",  # Python's float() takes it; the pattern does not
        "performance:+4",
        "performance:\t4",
        ",,,",
        "performance:4,",
        "Performance:4",
        "performance:-1",
        "performance:4\n",
    ],
)
def test_weights_are_refused_exactly_when_the_pattern_says(
    spec: dict[str, Any], client: FlaskClient, service: Service, weights: str
) -> None:
    pattern = _parameter(spec, "weights")["pattern"]
    assert pattern == WEIGHTS_PATTERN
    finished(service, "a", {**AXES_A, "fairness": 90.0})
    response = client.get("/api/v1/tasks/sentiment/leaderboard", query_string={"weights": weights})
    if re.fullmatch(pattern, weights):
        assert response.status_code == 200, response.get_json()
    else:
        assert_error(response, 400, "bad_weights")


def test_image_too_large_is_always_413(spec: dict[str, Any]) -> None:
    responses = spec["paths"]["/api/v1/tasks/{task_name}/submissions"]["post"]["responses"]
    assert "image_too_large" in responses["413"]["description"]
    assert "image_too_large" not in responses["422"]["description"]
    # both ways of being too large answer 413: test_upload_over_the_task_limit_is_413 (bytes)
    # and test_a_gzip_bomb_is_refused_from_its_trailer_without_decompressing (unpacked)


def test_chunked_json_over_64_kib_is_413(client: FlaskClient, service: Service) -> None:
    """A chunked body has no Content-Length: the dev server hands it over dechunked and
    marked terminated, as here."""
    body = json.dumps({"name": "m", "runtime": DOCKER, "pad": "x" * 100_000}).encode()
    response = client.post(
        SUBMIT,
        input_stream=io.BytesIO(body),
        content_type="application/json",
        environ_overrides={"wsgi.input_terminated": True},
    )
    assert_error(response, 413, "body_too_large")
    small = json.dumps({"name": "m", "runtime": DOCKER}).encode()
    response = client.post(
        SUBMIT,
        input_stream=io.BytesIO(small),
        content_type="application/json",
        environ_overrides={"wsgi.input_terminated": True},
    )
    assert response.status_code == 201, response.get_json()


@pytest.fixture
def live(service: Service) -> Iterator[int]:
    server = make_api_server("127.0.0.1", 0, create_app(service))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def raw_request(port: int, data: bytes) -> tuple[str, dict[str, str], bytes]:
    """Status line, headers and body of one request sent as bytes to 127.0.0.1:``port``."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return status, headers, body


def test_a_url_over_64_kib_is_a_json_414(live: int) -> None:
    path = b"/api/v1/tasks/" + b"x" * 70_000
    status, headers, body = raw_request(live, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status.startswith("HTTP/1.1 414")
    assert headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert error["code"] == "request_uri_too_long" and error["message"]


# -- 5. names ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["m" * 128 + "\n", "m\n", "m" * 129, "m\r", "m\x00"])
def test_names_over_the_column_or_with_a_newline_are_422(
    client: FlaskClient, service: Service, name: str
) -> None:
    assert_error(client.post(SUBMIT, json={"name": name, "runtime": DOCKER}), 422)
    assert_error(upload(client, image_tar(), name=name), 422)
    assert_nothing_stored(service)


def test_a_128_character_name_is_accepted(client: FlaskClient) -> None:
    response = client.post(SUBMIT, json={"name": "m" * 128, "runtime": DOCKER})
    assert response.status_code == 201, response.get_json()


# -- 6. references that can never run ---------------------------------------------------------
@pytest.mark.parametrize(
    "image",
    ["MyOrg/model:1", "registry.example.org/Team/model:1", "Model:1", "model:tägé"],
)
def test_references_docker_refuses_are_422(
    client: FlaskClient, service: Service, image: str
) -> None:
    response = client.post(SUBMIT, json={"name": "m", "runtime": {**DOCKER, "image": image}})
    assert_error(response, 422, "invalid_submission")
    assert stored_rows(service) == (0, 0)


@pytest.fixture
def local_client(tmp_path: Path) -> Iterator[tuple[FlaskClient, Service]]:
    svc = make_service(tmp_path / "local", allow_local=True)
    try:
        yield admin_client(create_app(svc).test_client(), svc), svc
    finally:
        svc.close()


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost/",  # the test client's Host and SERVER_NAME/PORT: localhost:80
        "http://localhost:80",
        "http://127.0.0.1:80/predict",
        "http://0x7f.1/",
        "http://[::1]:80",
        "http://0.0.0.0",
        "http://api.localhost",
    ],
)
def test_a_url_runtime_at_the_api_itself_is_refused(
    local_client: tuple[FlaskClient, Service], url: str
) -> None:
    client, svc = local_client
    runtime = {"kind": "url", "url": url, "protocol": "v1"}
    body = assert_error(client.post(SUBMIT, json={"name": "m", "runtime": runtime}), 422)
    assert "this API server" in body["message"]
    assert stored_rows(svc) == (0, 0)


def test_a_url_runtime_on_another_loopback_port_is_accepted(
    local_client: tuple[FlaskClient, Service],
) -> None:
    client, _ = local_client
    runtime = {"kind": "url", "url": "http://127.0.0.1:8080", "protocol": "v1"}
    response = client.post(SUBMIT, json={"name": "m", "runtime": runtime})
    assert response.status_code == 201, response.get_json()


# -- 7. registries on local networks ----------------------------------------------------------
LOCAL_REGISTRIES = [
    "127.0.0.1:5000/m:1",
    "127.1/m",
    "2130706433:5000/m",
    "0x7f.1/m",
    "0177.0.0.1/m",
    "localhost/m",
    "localhost:5000/m",
    "reg.localhost/m",
    "169.254.169.254/latest:1",
    "metadata.google.internal/m",
    "0.0.0.0:5000/m",
    "[::1]:5000/m",
    "[::]/m",
    "[::ffff:127.0.0.1]/m",
    "[::ffff:a9fe:a9fe]/m",
    "[::7f00:1]/m",  # IPv4-compatible
    "[64:ff9b::a9fe:a9fe]/m",  # NAT64 of 169.254.169.254
    "[2002:7f00:1::]/m",  # 6to4 of 127.0.0.1
    "10.0.0.8/m",
    "172.16.3.4/m",
    "192.168.1.10:443/m",
    "100.64.0.1/m",
    "[fd00::1]/m",
    "[fe80::1]/m",
    "224.0.0.1/m",
    "registry:5000/m",  # a single label: found through the local search domains
    "printer.local/m",
]


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Records (and blocks) any resolution or connection during the request."""
    calls: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        raise OSError("no network in this test")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return calls


@pytest.mark.parametrize("image", LOCAL_REGISTRIES)
def test_local_network_registries_are_refused_before_any_network_use(
    client: FlaskClient, service: Service, no_network: list[Any], image: str
) -> None:
    response = client.post(SUBMIT, json={"name": "m", "runtime": {**DOCKER, "image": image}})
    assert_error(response, 422, "invalid_submission")
    assert stored_rows(service) == (0, 0)
    assert no_network == []


@pytest.mark.parametrize(
    "image", ["ghcr.io/team/m:1", "team/m", "m", "8.8.8.8/m", "[2606:4700::1111]:443/m"]
)
def test_public_registries_are_accepted(client: FlaskClient, image: str) -> None:
    response = client.post(SUBMIT, json={"name": "m", "runtime": {**DOCKER, "image": image}})
    assert response.status_code == 201, response.get_json()


@pytest.mark.parametrize(
    ("spelling", "address"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0177.0.0.01", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("169.254.43518", "169.254.169.254"),
        ("::1", "::1"),
        ("registry.example.org", None),
        ("08.1", None),  # 08 is no octal number: a name
        ("256.1.1.1", None),
    ],
)
def test_ip_spellings(spelling: str, address: str | None) -> None:
    found = parse_ip_host(spelling)
    assert (str(found) if found else None) == address


def test_the_operator_allow_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check_registry_address("127.0.0.1:5000/m", ["127.0.0.1:5000"])
    check_registry_address("localhost:5000/m", ["localhost"])  # a host: any port
    with pytest.raises(ValueError):
        check_registry_address("127.0.0.1:5001/m", ["127.0.0.1:5000"])
    monkeypatch.setenv("DYNAEVAL_ALLOWED_REGISTRIES", "127.0.0.1:5000, registry.lan:443")
    svc = Service.open(tmp_path / "data")
    try:
        assert svc.allowed_registries == ("127.0.0.1:5000", "registry.lan:443")
        client = admin_client(create_app(svc).test_client(), svc)
        for image, status in (("127.0.0.1:5000/m:1", 201), ("127.0.0.1:5001/m:1", 422)):
            response = client.post(
                SUBMIT, json={"name": "m", "runtime": {**DOCKER, "image": image}}
            )
            assert response.status_code == status, response.get_json()
    finally:
        svc.close()


def test_serve_passes_its_allow_list_into_the_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from client.cli import build_parser
    from client.common import open_service

    args = build_parser().parse_args(
        ["serve", "--allow-registry", "127.0.0.1:5000", "--allow-registry", "[::1]"]
    )
    assert args.allow_registry == ["127.0.0.1:5000", "[::1]"]
    monkeypatch.setenv("DYNAEVAL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("DYNAEVAL_DATABASE_URL", raising=False)
    monkeypatch.setenv("DYNAEVAL_ALLOWED_REGISTRIES", "registry.lan")
    svc = open_service(False, args.allow_registry)
    try:
        assert svc.allowed_registries == ("registry.lan", "127.0.0.1:5000", "[::1]")
        task = svc.tasks["sentiment"]
        for image in ("127.0.0.1:5000/m:1", "[::1]:5000/m", "registry.lan/m"):
            submit_reference(svc, task, "m", image)
    finally:
        svc.close()


def test_the_cli_local_submission_is_trusted(service: Service) -> None:
    task = service.tasks["sentiment"]
    with pytest.raises(SubmissionRefused):
        submit_reference(service, task, "m", "127.0.0.1:5000/m:1")
    submitted = submit_reference(service, task, "m", "127.0.0.1:5000/m:1", trusted=True)
    assert submitted.spec.to_dict()["image"] == "127.0.0.1:5000/m:1"


# -- 8. what responses give away --------------------------------------------------------------
def test_no_server_banner(live: int) -> None:
    status, headers, _ = raw_request(
        live, b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    )
    assert status.startswith("HTTP/1.1 200")
    assert headers["server"] == SERVER_BANNER
    assert "werkzeug" not in headers["server"].lower() and "python" not in headers["server"].lower()


def test_the_worker_host_is_shown_to_admins_only(client: FlaskClient, service: Service) -> None:
    model_id = finished(service, "a", {**AXES_A, "fairness": 90.0})
    owner = issue_token(service, "rita", "researcher")
    Accounts(service.db).set_model_owner(model_id, Accounts(service.db).user_by_name("rita")["id"])
    researcher = signed_in(create_app(service).test_client(), owner)
    shown = researcher.get(f"/api/v1/submissions/{model_id}").get_json()
    [attempt] = shown["job"]["attempt_history"]
    assert "worker" not in attempt and "seed-worker" not in json.dumps(shown)
    as_admin = client.get(f"/api/v1/submissions/{model_id}").get_json()
    assert as_admin["job"]["attempt_history"][0]["worker"] == "seed-worker"


@pytest.mark.parametrize("path", ["/api/v1/submissions/", "/api/v1/uploads/"])
def test_an_error_does_not_echo_a_huge_address(client: FlaskClient, path: str) -> None:
    """A 404 repeated all 5,000 characters of the id it was asked for (outside testers)."""
    answer = client.get(path + "a" * 5000)
    assert answer.status_code == 404
    message = answer.get_json()["error"]["message"]
    assert 0 < len(message) <= 600 and message.endswith("…")
