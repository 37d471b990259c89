"""Webhook delivery end to end, with a real receiver on loopback: the outbox is written with
the job's final state (done, failed, cancelled, a lost worker), each delivery is signed and
retried on the back-off schedule of a ManualClock, claims never overlap (SQLite and
PostgreSQL), and local-network addresses are refused unless allow-listed — at delivery
too, when a name resolves to one (DNS rebinding)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from configs.settings import load_settings
from configs.vocabulary.clock import ManualClock
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.jobs import JobStatus, RetryPolicy, Settlement
from configs.vocabulary.results import EvaluationResult, Failure
from configs.vocabulary.webhooks import retry_delay, sign, verify_signature
from store.accounts import Accounts
from store.blobs import LocalBlobStore
from store.db import Database
from store.jobs import JobStore
from store.sealing import Sealer
from store.webhooks import DELIVERED, GAVE_UP, PENDING, WebhookStore
from worker.webhooks import Refused, WebhookSender, check_url
from worker.worker import Worker

SPEC = {"kind": "url", "url": "http://127.0.0.1:9", "protocol": "v1"}
LOOPBACK = ("127.0.0.1",)

SEALER = Sealer.ephemeral()  # one key for every store over a test's database


class Receiver:
    """An HTTP server on 127.0.0.1 that records each POST and answers the next status."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.statuses = list(statuses or [])
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(outer.statuses.pop(0) if outer.statuses else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/ci?x=1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    yield database
    database.dispose()


@pytest.fixture
def jobs(db: Database, clock: ManualClock) -> JobStore:
    store = JobStore(db, clock)
    store.register_task("toy", 1, {})
    return store


def user(db: Database, name: str = "alice") -> str:
    return str(Accounts(db).add_user(name, "researcher")["id"])


def unix(clock: ManualClock) -> int:
    return int(clock.now().replace(tzinfo=UTC).timestamp())


def result() -> EvaluationResult:
    return EvaluationResult(
        task="toy",
        status="done",
        summary={"performance": 81.5, "throughput": 12.0, "metric": "accuracy"},
        rounds=[{"round": "alpha", "performance": 81.5, "robustness": 70.0, "fairness": 90.0}],
    )


def test_done_failed_and_cancelled_are_delivered_signed(
    db: Database, jobs: JobStore, clock: ManualClock, receiver: Receiver
) -> None:
    alice = user(db)
    hooks = WebhookStore(db, SEALER, clock)
    _, secret = hooks.create(alice, receiver.url, ["done", "failed", "cancelled"])
    done_id, done_job = jobs.submit("toy", "good", SPEC, owner_id=alice)
    claimed = jobs.claim("w", 60)
    assert claimed is not None and jobs.finish(done_job, "w", result(), lease=claimed.lease)
    failed_id, failed_job = jobs.submit("toy", "bad", SPEC, owner_id=alice)
    claimed = jobs.claim("w", 60)
    crash = Failure(FailureCode.CRASHED, "exited with code 3", log_tail="SECRET LOG")
    final = Settlement(JobStatus.FAILED, None, "failed")
    assert claimed is not None
    assert jobs.fail(failed_job, "w", crash, final, lease=claimed.lease) == JobStatus.FAILED
    cancelled_id, _ = jobs.submit("toy", "stopped", SPEC, owner_id=alice)
    assert jobs.cancel(cancelled_id, "stopped by alice").cancelled
    jobs.submit("toy", "bob's", SPEC, owner_id=user(db, "bob"))  # not alice's: no delivery

    assert WebhookSender(hooks, allow_hosts=LOOPBACK).deliver_due() == 3
    by_event = {}
    for headers, body in receiver.requests:
        signature = headers["dynaeval-signature"]
        assert verify_signature(secret, signature, body, now=unix(clock))
        tampered = body.replace(b'"toy"', b'"toz"')
        assert tampered != body
        assert not verify_signature(secret, signature, tampered, now=unix(clock))
        assert not verify_signature("whsec_other", signature, body, now=unix(clock))
        assert not verify_signature(secret, signature, body, now=unix(clock) + 301)  # a replay
        payload = json.loads(body)
        assert headers["dynaeval-event"] == payload["event"]
        assert headers["dynaeval-delivery"] == payload["id"]
        by_event[payload["event"]] = payload
    assert by_event["done"]["submission"]["id"] == done_id
    assert by_event["done"]["scores"] == {"performance": 81.5, "throughput": 12.0}
    assert by_event["done"]["rounds"][0] == {
        "round": "alpha",
        "performance": 81.5,
        "robustness": 70.0,
        "fairness": 90.0,
    }
    assert by_event["failed"]["submission"]["id"] == failed_id
    assert by_event["failed"]["failure"] == {"code": "crashed", "message": "exited with code 3"}
    assert by_event["cancelled"]["submission"]["id"] == cancelled_id
    assert by_event["cancelled"]["failure"]["code"] == "cancelled"
    assert b"SECRET LOG" not in b"".join(body for _, body in receiver.requests)
    webhook_id = hooks.webhooks(alice)[0].id
    assert {d["status"] for d in hooks.deliveries(webhook_id)} == {DELIVERED}
    assert WebhookSender(hooks, allow_hosts=LOOPBACK).deliver_due() == 0  # each sent once


def test_only_final_states_and_chosen_events_queue_deliveries(
    db: Database, jobs: JobStore, clock: ManualClock
) -> None:
    alice = user(db)
    hooks = WebhookStore(db, SEALER, clock)
    only_done, _ = hooks.create(alice, "https://hooks.example.com/a", ["done"])
    model_id, job_id = jobs.submit("toy", "m", SPEC, owner_id=alice)
    one_model, _ = hooks.create(alice, "https://hooks.example.com/b", ["failed"], model_id)
    claimed = jobs.claim("w", 60)
    assert claimed is not None
    retry = Settlement(JobStatus.QUEUED, clock.now(), "retrying")
    platform = Failure(FailureCode.PLATFORM_ERROR, "engine hiccup")
    assert jobs.fail(job_id, "w", platform, retry, lease=claimed.lease) == JobStatus.QUEUED
    assert hooks.deliveries(only_done.id) == hooks.deliveries(one_model.id) == []  # not final
    assert not jobs.finish(job_id, "w", result(), lease=claimed.lease)  # a lost lease: nothing
    assert jobs.cancel(model_id, "stop").cancelled
    assert not jobs.cancel(model_id, "again").cancelled  # already final: no second delivery
    assert hooks.deliveries(only_done.id) == []
    assert [d["event"] for d in hooks.deliveries(one_model.id)] == []  # cancelled, not failed
    _, job_2 = jobs.submit("toy", "m2", SPEC, owner_id=alice)
    jobs.claim("w", 60)
    clock.advance(61)  # the worker died: its lease expires and settles the job as failed
    assert jobs.requeue_stalled(RetryPolicy(platform_budget=1)) == [job_2]
    assert hooks.deliveries(only_done.id) == []  # failed, not done
    assert hooks.deliveries(one_model.id) == []  # another submission


def test_a_lost_worker_notifies_failed(db: Database, jobs: JobStore, clock: ManualClock) -> None:
    alice = user(db)
    hooks = WebhookStore(db, SEALER, clock)
    hook, _ = hooks.create(alice, "https://hooks.example.com/a", ["failed"])
    jobs.submit("toy", "m", SPEC, owner_id=alice)
    jobs.claim("w", 60)
    clock.advance(61)
    assert len(jobs.requeue_stalled(RetryPolicy(platform_budget=1))) == 1
    [delivery] = hooks.deliveries(hook.id)
    assert delivery["event"] == "failed" and delivery["status"] == PENDING


def test_a_failing_receiver_is_retried_on_the_back_off_schedule(
    db: Database, jobs: JobStore, clock: ManualClock, receiver: Receiver
) -> None:
    hooks = WebhookStore(db, SEALER, clock)
    hook, _ = hooks.create(user(db), receiver.url, ["done"])
    sender = WebhookSender(hooks, allow_hosts=LOOPBACK)
    receiver.statuses = [500, 200]
    hooks.ping(hook.id)
    assert sender.deliver_due() == 1
    [delivery] = hooks.deliveries(hook.id)
    assert delivery["status"] == PENDING and delivery["last_status_code"] == 500
    assert delivery["next_attempt_at"] == (clock.now() + retry_delay(1)).isoformat() + "Z"
    clock.advance(9)
    assert sender.deliver_due() == 0  # not due yet
    clock.advance(1)
    assert sender.deliver_due() == 1
    [delivery] = hooks.deliveries(hook.id)
    assert delivery["status"] == DELIVERED and delivery["attempts"] == 2
    assert [a["status_code"] for a in delivery["history"]] == [500, 200]
    assert delivery["next_attempt_at"] is None


def test_max_attempts_ends_in_failed(db: Database, clock: ManualClock) -> None:
    hooks = WebhookStore(db, SEALER, clock, max_attempts=4)
    # nothing listens on port 9 of loopback (discard): every attempt is refused
    hook, _ = hooks.create(user(db), "http://127.0.0.1:9/", ["done"])
    sender = WebhookSender(hooks, allow_hosts=LOOPBACK, timeout_s=2)
    hooks.ping(hook.id)
    waits = []
    for attempt in range(1, 5):
        assert sender.deliver_due() == 1
        delivery = hooks.deliveries(hook.id)[0]
        if attempt < 4:
            waits.append(delivery["next_attempt_at"])
            clock.advance(retry_delay(attempt).total_seconds())
    assert delivery["status"] == GAVE_UP and delivery["attempts"] == 4
    assert delivery["last_status_code"] is None and delivery["last_error"]
    assert len(delivery["history"]) == 4 and len(set(waits)) == 3
    clock.advance(10**6)
    assert sender.deliver_due() == 0
    assert [retry_delay(n).total_seconds() for n in range(1, 8)] == [
        10,
        30,
        120,
        600,
        3600,
        3600,
        3600,
    ]


def test_two_notifiers_never_claim_one_delivery(database_url: str) -> None:
    db = Database(database_url)
    clock = ManualClock()
    hooks = WebhookStore(db, SEALER, clock)
    hook, _ = hooks.create(user(db), "https://hooks.example.com/a", ["done"])
    for _ in range(30):
        hooks.ping(hook.id)
    claimed: list[str] = []
    barrier = threading.Barrier(4)

    def claim() -> None:
        mine = WebhookStore(db, SEALER, clock)
        barrier.wait()
        while batch := mine.claim_due(limit=3):
            claimed.extend(d.id for d in batch)

    threads = [threading.Thread(target=claim) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(claimed) == len(set(claimed)) == 30
    assert hooks.claim_due() == []  # claimed rows stay hidden while their claim lasts
    db.dispose()


def test_urls_on_local_networks_are_refused_unless_allow_listed() -> None:
    for url in (
        "http://127.0.0.1/",
        "http://localhost:8000/",
        "http://api.localhost/",
        "http://2130706433/",
        "http://0x7f.1/",
        "http://0177.0.0.1/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://169.254.169.254/latest/meta-data",
        "http://metadata.google.internal/",
        "http://10.1.2.3/",
        "http://192.168.0.1/",
        "http://0.0.0.0/",
        "http://intranet/",
        "http://printer.local/",
        "ftp://hooks.example.com/",
        "javascript:alert(1)",
        "http:///nohost",
    ):
        with pytest.raises(Refused):
            check_url(url)
    assert check_url("https://hooks.example.com/ci")
    assert check_url("http://93.184.216.34:8080/x")
    assert check_url("http://127.0.0.1:8080/", ["127.0.0.1"])
    assert check_url("http://127.0.0.1:8080/", ["127.0.0.1:8080"])
    with pytest.raises(Refused):
        check_url("http://127.0.0.1:8081/", ["127.0.0.1:8080"])


def test_a_name_resolving_to_a_private_address_is_refused_at_delivery(
    db: Database, clock: ManualClock, receiver: Receiver
) -> None:
    """DNS rebinding: the name was public when the webhook was made."""
    hooks = WebhookStore(db, SEALER, clock)
    port = receiver.server.server_address[1]
    hook, _ = hooks.create(user(db), f"http://hooks.example.com:{port}/ci", ["done"])
    hooks.ping(hook.id)
    rebound = WebhookSender(hooks, allow_hosts=(), resolver=lambda host, port: ["127.0.0.1"])
    assert rebound.deliver_due() == 1
    delivery = hooks.deliveries(hook.id)[0]
    assert "non-public" in delivery["last_error"] and receiver.requests == []
    clock.advance(10)
    allowed = ("hooks.example.com",)
    pinned = WebhookSender(hooks, allow_hosts=allowed, resolver=lambda host, port: ["127.0.0.1"])
    assert pinned.deliver_due() == 1  # sent to the address checked, under its own name
    [(headers, _)] = receiver.requests
    assert headers["host"] == f"hooks.example.com:{port}"


def test_a_redirect_is_not_followed(db: Database, clock: ManualClock, receiver: Receiver) -> None:
    hooks = WebhookStore(db, SEALER, clock)
    hook, _ = hooks.create(user(db), receiver.url, ["done"])
    receiver.statuses = [302]
    hooks.ping(hook.id)
    WebhookSender(hooks, allow_hosts=LOOPBACK).deliver_due()
    delivery = hooks.deliveries(hook.id)[0]
    assert delivery["status"] == PENDING and delivery["last_status_code"] == 302
    assert len(receiver.requests) == 1


def test_the_worker_runs_the_webhook_sender(
    db: Database,
    jobs: JobStore,
    clock: ManualClock,
    receiver: Receiver,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DYNAEVAL_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("DYNAEVAL_WEBHOOK_ALLOW_HOSTS", "127.0.0.1")
    hooks = WebhookStore(db, SEALER, clock)
    hook, secret = hooks.create(user(db), receiver.url, ["done"])
    hooks.ping(hook.id)
    blobs = LocalBlobStore(tmp_path / "blobs")
    Worker(jobs, blobs, {}, worker_id="w-burst", sealer=SEALER).work(burst=True)
    [(headers, body)] = receiver.requests  # a burst run sends what is due before returning
    assert verify_signature(secret, headers["dynaeval-signature"], body, now=unix(clock))
    worker = Worker(jobs, blobs, {}, worker_id="w-long", poll_s=0.05, sealer=SEALER)
    thread = threading.Thread(target=worker.work, daemon=True)
    thread.start()
    hooks.ping(hook.id)
    deadline = threading.Event()
    for _ in range(200):
        if len(receiver.requests) == 2:
            break
        deadline.wait(0.05)
    assert len(receiver.requests) == 2
    worker.stop()
    thread.join(timeout=30)
    assert not thread.is_alive() and not worker.webhooks._thread.is_alive()  # type: ignore[union-attr]


def test_signatures_are_checked_strictly() -> None:
    body = b'{"event":"ping"}'
    header = sign("whsec_a", body, 1_700_000_000)
    assert verify_signature("whsec_a", header, body, now=1_700_000_100)
    assert not verify_signature("whsec_a", header, body, now=1_700_000_301)
    assert not verify_signature("whsec_a", header, body, tolerance_s=10, now=1_700_000_100)
    for bad in ("", "t=abc,v1=00", "v1=" + "0" * 64, f"t=1700000000,v1={'0' * 64}"):
        assert not verify_signature("whsec_a", bad, body, now=1_700_000_000)


def test_the_allow_list_is_a_setting(tmp_path: Path) -> None:
    (tmp_path / "dynaeval.toml").write_text('webhook_allow_hosts = "Hooks.LAN, 10.0.0.2:8080"\n')
    settings = load_settings(environ={}, cwd=tmp_path)
    assert settings.webhook_allow_hosts == ("hooks.lan", "10.0.0.2:8080")
    assert settings.source("webhook_allow_hosts").kind == "file"
    from_env = load_settings(environ={"DYNAEVAL_WEBHOOK_ALLOW_HOSTS": "[::1]"}, cwd=tmp_path)
    assert from_env.webhook_allow_hosts == ("[::1]",)
    assert check_url("http://[::1]:9/", from_env.webhook_allow_hosts)
    (tmp_path / "empty").mkdir()
    assert load_settings(environ={}, cwd=tmp_path / "empty").webhook_allow_hosts == ()


def test_a_burst_run_sends_at_its_end_without_a_sender_thread(
    db: Database,
    jobs: JobStore,
    clock: ManualClock,
    receiver: Receiver,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A burst run started the sender's thread too: the thread could claim the delivery,
    and the run's end stop it and hand the delivery back unsent (seen once in CI)."""
    monkeypatch.setenv("DYNAEVAL_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("DYNAEVAL_WEBHOOK_ALLOW_HOSTS", "127.0.0.1")

    def no_thread(self: WebhookSender) -> None:
        raise AssertionError("a burst run must not start the sender's thread")

    monkeypatch.setattr(WebhookSender, "start", no_thread)
    hooks = WebhookStore(db, SEALER, clock)
    hook, _ = hooks.create(user(db), receiver.url, ["done"])
    hooks.ping(hook.id)
    Worker(jobs, LocalBlobStore(tmp_path / "blobs"), {}, worker_id="w", sealer=SEALER).work(
        burst=True
    )
    assert len(receiver.requests) == 1


def test_a_stop_while_the_sender_starts_does_not_fail(
    db: Database, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal stops serve's workers while one of them is starting its webhook sender:
    the stop must not join a thread that has not started yet (RuntimeError: serve then
    exited 1 on SIGTERM in CI)."""
    import threading

    sender = WebhookSender(WebhookStore(db, SEALER, clock), allow_hosts=LOOPBACK)
    original = threading.Thread.start

    def stopped_meanwhile(thread: threading.Thread) -> None:
        sender.stop(timeout=0)  # between the thread's making and its start
        original(thread)

    monkeypatch.setattr(threading.Thread, "start", stopped_meanwhile)
    sender.start()
    monkeypatch.undo()
    sender.stop()
