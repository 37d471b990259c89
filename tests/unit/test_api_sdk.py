"""The SDK: ``wait`` says when it gave up instead of returning a non-final submission, and
the Dynabench-style ``DynabenchClient`` against a live server on loopback (a real HTTP
server thread running the Flask app on a temp data dir, results written through the store
by a real worker)."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import request
from werkzeug.serving import make_server

from api.app import create_app
from client.sdk import (
    ApiClientError,
    DynabenchClient,
    DynaevalClient,
    WaitTimeout,
    job_status,
    wait_until_final,
)
from store.accounts import Accounts
from store.models import ModelRow
from tests.unit.test_worker import FakeModel, FakeRuntime, factory_of
from usecases.service import Service
from worker.worker import Worker


def submission(status: str) -> dict[str, Any]:
    return {"id": "m1", "job": {"status": status, "stage": status}}


def test_wait_returns_the_final_submission() -> None:
    states = iter(["queued", "running", "done"])
    found = wait_until_final(lambda: submission(next(states)), timeout=5, poll=0.01)
    assert job_status(found) == "done"


def test_wait_raises_a_timeout_error_carrying_the_last_state() -> None:
    with pytest.raises(TimeoutError) as caught:
        wait_until_final(lambda: submission("running"), timeout=0.05, poll=0.01)
    assert isinstance(caught.value, WaitTimeout)
    assert caught.value.submission["job"]["status"] == "running"
    assert "m1" in str(caught.value) and "running" in str(caught.value)


def test_client_wait_uses_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    client = DynaevalClient("http://127.0.0.1:9")
    monkeypatch.setattr(client, "submission", lambda model_id: submission("queued"))
    with pytest.raises(WaitTimeout):
        client.wait("m1", timeout=0.05, poll=0.01)
    monkeypatch.setattr(client, "submission", lambda model_id: submission("failed"))
    assert job_status(client.wait("m1", timeout=0.05, poll=0.01)) == "failed"


# -- the Dynabench-style SDK against a live server on loopback -------------------------------
@dataclasses.dataclass
class Live:
    url: str
    service: Service
    authorization: list[str | None]
    api_key: str  # a researcher's token (read, submit)
    user_id: str

    def run_worker(self, labels: dict[str, str]) -> None:
        """A real worker drains the queue; each image reference answers one constant label
        (an in-process model on loopback), so results and predictions go through the store."""
        runtimes: list[FakeRuntime] = []
        factory = factory_of(lambda spec: FakeModel(labels[spec.image]), runtimes)
        worker = Worker(
            self.service.store,
            self.service.blobs,
            self.service.tasks,
            config_dir=self.service.config_dir,
            worker_id="sdk-test-worker",
            runtime_factory=factory,
            heartbeat_s=0.05,
        )
        stats = worker.work(burst=True)
        assert stats.failed == 0 and all(r.stopped for r in runtimes)


@pytest.fixture
def live(tmp_path: Path, config_dir: Path) -> Iterator[Live]:
    """The Flask app served by a real HTTP server thread on 127.0.0.1 (toy task, temp data)."""
    service = Service.open(tmp_path / "data", config_dir=config_dir)
    app = create_app(service)
    seen: list[str | None] = []

    @app.before_request
    def record() -> None:
        seen.append(request.headers.get("Authorization"))

    accounts = Accounts(service.db, service.clock)
    user = accounts.add_user("alice", "researcher")
    token = accounts.create_token(user["id"], "sdk", ["read", "submit"])
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Live(
            f"http://127.0.0.1:{server.server_port}", service, seen, token.secret, user["id"]
        )
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
        service.close()


YES, NO = "ghcr.io/team/yes:1", "ghcr.io/team/no:1"  # a server takes public registries


def test_dynabench_client_submits_waits_and_reads_results(live: Live) -> None:
    client = DynabenchClient(api_key=live.api_key, url=live.url)
    created = client.submit_model(YES, "toy", "always yes (v1)")
    assert created["status"] == "queued" and created["name"] == "always yes -v1-"
    assert live.authorization and set(live.authorization) == {f"Bearer {live.api_key}"}
    live.run_worker({YES: "yes"})
    final = client.wait(created["id"], timeout=30, poll=0.05)
    assert job_status(final) == "done"
    results = client.get_results(created["id"])
    assert results["status"] == "done" and results["task"] == "toy"
    alpha, r12 = results["round1_acc"], results["round2_acc"]  # toy's rounds, in order
    assert [alpha, r12] == [row["performance"] for row in results["rounds"]]
    assert results["performance"] == pytest.approx((alpha + 3 * r12) / 4)  # weights 1 and 3
    assert "round1_robustness" in results and "round2_fairness" in results
    assert "dynascore" in results  # None while the leaderboard cannot rank the model
    board = client.leaderboard("toy", {"performance": 4, "memory": 0})
    assert board["weights"]["performance"] == 4 and board["weights"]["memory"] == 0


def test_get_results_takes_the_dynascore_from_the_default_leaderboard(live: Live) -> None:
    from tests.unit.test_api import AXES_A, AXES_B, finished

    first = finished(live.service, "a", AXES_A, task="toy")  # a hand-made macro-F1 result
    finished(live.service, "b", AXES_B, task="toy")
    Accounts(live.service.db).set_model_owner(first, live.user_id)
    board = DynabenchClient(url=live.url).leaderboard("toy")  # public: no key needed
    assert live.authorization == [None]  # no api_key: no header at all
    results = DynabenchClient(api_key=live.api_key, url=live.url).get_results(first)
    [entry] = [m for m in board["models"] if m["model_id"] == first]
    assert results["dynascore"] == entry["dynascore"] is not None
    assert results["round1_f1"] == AXES_A["performance"]  # macro-F1 is abbreviated "f1"


def test_submit_model_uploads_a_tarball_as_multipart(live: Live, tmp_path: Path) -> None:
    from tests.unit.test_api import image_tar

    tarball = tmp_path / "model v1.tar"
    tarball.write_bytes(image_tar())
    client = DynabenchClient(api_key=live.api_key, url=live.url)
    created = client.submit_model(tarball, "toy", "from a tarball")
    with live.service.db.session() as session:
        stored = session.get(ModelRow, created["id"])
        assert stored is not None and stored.runtime["source"] == "upload"


def test_server_errors_keep_their_code(live: Live) -> None:
    with pytest.raises(ApiClientError) as caught:
        DynabenchClient(api_key=live.api_key, url=live.url).get_results("no-such-model")
    assert caught.value.status == 404 and caught.value.code == "unknown_submission"


def test_compare_runs_the_paired_bootstrap_on_the_server(live: Live) -> None:
    client = DynabenchClient(api_key=live.api_key, url=live.url)
    yes = client.submit_model(YES, "toy", "yes")["id"]
    no = client.submit_model(NO, "toy", "no")["id"]
    other_no = client.submit_model(NO, "toy", "no again")["id"]
    with pytest.raises(ApiClientError) as caught:  # nothing stored before a run finished
        client.api.compare(yes, no)
    assert caught.value.status == 409 and caught.value.code == "no_predictions"
    live.run_worker({YES: "yes", NO: "no"})
    worse = client.api.compare(yes, no)
    results = {m: client.get_results(m)["performance"] for m in (yes, no)}
    assert worse["candidate_performance"] == pytest.approx(results[yes])
    assert worse["baseline_performance"] == pytest.approx(results[no])
    assert worse["difference"] == pytest.approx(results[yes] - results[no])
    assert worse["ci"][1] < 0 and worse["significant_drop"] is True
    assert [r["round"] for r in worse["rounds"]] == ["alpha", "r12"] and worse["n"] == 40
    assert "label" not in json.dumps(worse) and "gold" not in json.dumps(worse)
    same = client.api.compare(no, other_no)
    assert same["difference"] == 0 and same["ci"][0] <= 0 <= same["ci"][1]
    assert same["significant_drop"] is False
    assert client.api.compare(no, yes)["significant_gain"] is True
    with pytest.raises(ApiClientError) as unknown:
        client.api.compare(yes, "nope")
    assert unknown.value.status == 404


@pytest.mark.parametrize("body", [b"[1, 2]", b'"maintenance"', b"<html>gateway</html>"])
def test_a_reply_that_is_no_json_object_is_a_clear_error(body: bytes) -> None:
    """Something between the SDK and the API (a proxy, a maintenance page) answering 200
    with a list, a string or HTML: an ApiClientError naming the route, not a KeyError or a
    list handed to the caller as a submission."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Proxy(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = DynaevalClient(f"http://127.0.0.1:{server.server_port}", api_key="k")
        with pytest.raises(ApiClientError) as caught:
            client.submission("m1")
        assert caught.value.code == "bad_reply" and "/submissions/m1" in str(caught.value)
    finally:
        server.shutdown()
        server.server_close()
