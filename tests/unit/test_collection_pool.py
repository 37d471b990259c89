"""``evaluator.collection.LivePool`` with small protocol-v1 models run by the process runtime.

The model script below records every request body and every start, so a test can show what
reached the wire (the input fields and an opaque id, never a label), that a failed model
was stopped, and that the next call started it again.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from configs.schema import ConfigError, TaskSpec
from configs.settings import load_settings
from configs.vocabulary.clock import ManualClock
from configs.vocabulary.examples import Example, Prediction
from configs.vocabulary.failures import FailureCode
from evaluator.collection import LiveModel, LiveModelError, LivePool
from evaluator.runtimes.runtime import Runtime
from evaluator.transport.client import ModelClient
from evaluator.transport.dialects import get_dialect
from evaluator.transport.endpoint import Endpoint
from store.blobs import LocalBlobStore
from tests.conftest import wait_until, with_limits

MODEL = textwrap.dedent(
    """
    import json, os, sys, time
    from http.server import BaseHTTPRequestHandler, HTTPServer

    mode, folder = sys.argv[1], sys.argv[2]
    with open(os.path.join(folder, "starts"), "a") as starts:
        starts.write(f"{os.getpid()}\\n")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, body):
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.reply({"status": "ok"})

        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            with open(os.path.join(folder, "bodies"), "a") as bodies:
                bodies.write(body.decode() + "\\n")
            first = not os.path.exists(os.path.join(folder, "answered"))
            open(os.path.join(folder, "answered"), "a").close()
            if mode == "exit":
                os._exit(1)
            if mode == "slow_once" and first:
                time.sleep(30)
            instances = json.loads(body)["instances"]
            labels = ["yes" if "she" in i["claim"].split() else "no" for i in instances]
            self.reply({"predictions": [
                {"uid": i["uid"], "label": label} for i, label in zip(instances, labels)
            ]})

    HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
    """
)
INPUTS = {"premise": "A woman reads.", "claim": "she reads"}
WIRE_ID = re.compile(r"[0-9a-f]{20}")


@pytest.fixture
def task(toy_task: TaskSpec) -> TaskSpec:
    return with_limits(toy_task, startup_s=10.0)


MakeModel = Callable[..., tuple[LiveModel, Path]]


@pytest.fixture
def make_model(tmp_path: Path) -> Iterator[MakeModel]:
    """``make_model(model_id, mode)``: a LiveModel running the script, and its record folder."""
    script = tmp_path / "model.py"
    script.write_text(MODEL)

    def make(model_id: str, mode: str = "answer") -> tuple[LiveModel, Path]:
        folder = tmp_path / model_id
        folder.mkdir()
        command = [sys.executable, str(script), mode, str(folder)]
        return LiveModel(model_id, {"kind": "process", "command": command}, None), folder

    yield make


@pytest.fixture
def pools() -> Iterator[list[LivePool]]:
    """The pools a test makes, closed after it whatever happens."""
    made: list[LivePool] = []
    yield made
    for pool in made:
        pool.close()


def pool_of(pools: list[LivePool], blobs: LocalBlobStore, **options: object) -> LivePool:
    pool = LivePool(blobs, **options)  # type: ignore[arg-type]
    pools.append(pool)
    return pool


def starts(folder: Path) -> list[int]:
    path = folder / "starts"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_answer_sends_only_the_input_fields(make_model, task, pools, blobs) -> None:
    assert list(inspect.signature(LivePool.answer).parameters) == [
        "self",
        "model",
        "task",
        "inputs",
    ]
    model, folder = make_model("m1")
    pool = pool_of(pools, blobs)
    first = pool.answer(model, task, INPUTS)
    second = pool.answer(model, task, {**INPUTS, "claim": "he reads"})
    assert (first.output, second.output) == ("yes", "no")
    assert first.uid != second.uid
    bodies = [json.loads(line) for line in (folder / "bodies").read_text().splitlines()]
    assert [set(body) for body in bodies] == [{"task", "instances"}] * 2
    instances = [instance for body in bodies for instance in body["instances"]]
    assert [set(instance) for instance in instances] == [{"uid", "premise", "claim"}] * 2
    assert [instance["claim"] for instance in instances] == ["she reads", "he reads"]
    assert all(WIRE_ID.fullmatch(instance["uid"]) for instance in instances)
    assert instances[0]["uid"] != instances[1]["uid"]
    assert len(starts(folder)) == 1 and pool.warm() == ["m1"]


def test_timeout_stops_the_model_and_the_next_call_restarts_it(
    make_model, task, pools, blobs
) -> None:
    model, folder = make_model("slow", "slow_once")
    pool = pool_of(pools, blobs, timeout_s=0.3)
    with pytest.raises(LiveModelError) as caught:
        pool.answer(model, task, INPUTS)
    assert caught.value.code == FailureCode.REQUEST_TIMEOUT.value
    assert caught.value.message == "the model did not answer within 0.3 s"
    assert pool.warm() == []
    [pid] = starts(folder)
    wait_until(lambda: not running(pid), 5.0, "the timed-out model to stop")
    assert pool.answer(model, task, INPUTS).output == "yes"
    assert len(starts(folder)) == 2 and pool.warm() == ["slow"]


def test_a_model_that_exits_is_reported_crashed(make_model, task, pools, blobs) -> None:
    model, folder = make_model("dies", "exit")
    pool = pool_of(pools, blobs)
    with pytest.raises(LiveModelError) as caught:
        pool.answer(model, task, INPUTS)
    assert caught.value.code == FailureCode.CRASHED.value
    assert caught.value.message == "the model exited with code 1"
    assert pool.warm() == []


def test_a_model_that_cannot_start(task, pools, blobs, tmp_path) -> None:
    command = [str(tmp_path / "no-such-model")]
    model = LiveModel("ghost", {"kind": "process", "command": command}, None)
    pool = pool_of(pools, blobs)
    with pytest.raises(LiveModelError) as caught:
        pool.answer(model, task, INPUTS)
    assert caught.value.code == FailureCode.START_FAILED.value
    assert pool.warm() == []


def test_budget_stops_the_least_recently_used(make_model, task, pools, blobs) -> None:
    (first, first_dir), (second, second_dir) = make_model("a"), make_model("b")
    pool = pool_of(pools, blobs, budget=1)
    pool.answer(first, task, INPUTS)
    assert pool.warm() == ["a"]
    pool.answer(second, task, INPUTS)
    assert pool.warm() == ["b"]
    [first_pid] = starts(first_dir)
    assert not running(first_pid)  # stopped (and reaped) before the second one started
    assert running(starts(second_dir)[0])


def test_stop_idle_reads_the_injected_clock(make_model, task, pools, blobs) -> None:
    clock = ManualClock()
    (first, _), (second, _) = make_model("a"), make_model("b")
    pool = pool_of(pools, blobs, budget=2, idle_s=300.0, clock=clock)
    pool.answer(first, task, INPUTS)
    clock.advance(100)
    pool.answer(second, task, INPUTS)
    clock.advance(250)  # a: idle 350 s, b: 250 s
    assert pool.stop_idle() == 1
    assert pool.warm() == ["b"]
    assert pool.stop_idle() == 0
    clock.advance(100)
    assert pool.stop_idle() == 1
    assert pool.warm() == []


def test_the_reaper_stops_idle_models_without_writes_and_ends_with_close(
    make_model, task, pools, blobs
) -> None:
    clock = ManualClock()
    model, folder = make_model("quiet")
    pool = pool_of(pools, blobs, idle_s=300.0, clock=clock)
    pool.start_reaper(check_s=0.01)
    pool.start_reaper(check_s=0.01)  # a second start is a no-op
    pool.answer(model, task, INPUTS)
    [pid] = starts(folder)
    clock.advance(299)
    assert pool.warm() == ["quiet"]  # passes run meanwhile; not idle long enough yet
    clock.advance(2)  # no write comes: the reaper alone notices
    wait_until(lambda: pool.warm() == [], 10.0, "the reaper to stop the idle model")
    wait_until(lambda: not running(pid), 5.0, "the idle model's process to end")
    reaper = pool._reaper
    pool.close()
    assert reaper is not None and not reaper.is_alive()


def test_stop_models_stops_only_those_named(make_model, task, pools, blobs) -> None:
    (first, _), (second, _) = make_model("a"), make_model("b")
    pool = pool_of(pools, blobs, budget=2)
    pool.answer(first, task, INPUTS)
    pool.answer(second, task, INPUTS)
    assert pool.stop_models(["a", "not-running"]) == ["a"]
    assert pool.warm() == ["b"]
    assert pool.answer(first, task, INPUTS).output  # started again on demand


def test_close_stops_everything_and_is_idempotent(make_model, task, pools, blobs) -> None:
    model, folder = make_model("m1")
    pool = pool_of(pools, blobs)
    pool.answer(model, task, INPUTS)
    pool.close()
    pool.close()
    assert pool.warm() == []
    [pid] = starts(folder)
    wait_until(lambda: not running(pid), 5.0, "the closed pool's model to stop")
    with pytest.raises(LiveModelError):
        pool.answer(model, task, INPUTS)


class FakeRuntime(Runtime):
    """A runtime with nothing behind it: the concurrency tests need no process."""

    def start(self) -> Endpoint:
        return Endpoint("127.0.0.1", 1, get_dialect("v1"))

    def stop(self) -> None:
        pass


class CountingClient:
    """Stands in for ModelClient: answers after a pause, counting requests in flight."""

    def __init__(self, tally: dict[str, int], lock: threading.Lock) -> None:
        self.tally, self.lock = tally, lock

    def predict(self, examples: list[Example], timeout: float, variant: str) -> list[Prediction]:
        with self.lock:
            self.tally["now"] += 1
            self.tally["most"] = max(self.tally["most"], self.tally["now"])
        time.sleep(0.05)
        with self.lock:
            self.tally["now"] -= 1
        return [Prediction(examples[0].uid, "yes")]

    def close(self) -> None:
        pass


@pytest.mark.parametrize(("ids", "most"), [(["same", "same"], 1), (["one", "two"], 2)])
def test_one_model_answers_one_writer_at_a_time(task, pools, blobs, ids, most) -> None:
    tally, lock = {"now": 0, "most": 0}, threading.Lock()

    def start(model: LiveModel, task: TaskSpec) -> tuple[Runtime, ModelClient]:
        return FakeRuntime(), CountingClient(tally, lock)  # type: ignore[return-value]

    pool = pool_of(pools, blobs, start_runtime=start)
    models = [LiveModel(model_id, {}, None) for model_id in ids]
    pool.answer(models[0], task, INPUTS)  # started before the race, so only answers overlap
    pool.answer(models[1], task, INPUTS)
    threads = [
        threading.Thread(target=pool.answer, args=(model, task, INPUTS)) for model in models * 3
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10.0)
    assert tally["most"] == most


def test_the_operator_sets_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from usecases.service import Service

    monkeypatch.setenv("DYNAEVAL_LIVE_MODEL_BUDGET", "3")
    monkeypatch.chdir(tmp_path)  # no dynaeval.toml here
    service = Service.open(tmp_path / "data")
    try:
        assert service.live._budget == 3
    finally:
        service.close()
    monkeypatch.setenv("DYNAEVAL_LIVE_MODEL_BUDGET", "none")
    with pytest.raises(ConfigError, match="live_model_budget"):
        load_settings()
