"""The model protocol client against real misbehaving servers on loopback.

Every bad reply ends in its own FailureCode, both through ``ModelClient`` directly and
through the pipeline with a ``ProcessRuntime`` (which must also keep the log tail and leave
no process behind). Instances carry the task's input fields and an opaque wire id (never
the dataset uid), nothing else. A request's time limit is a deadline, trickling included.
"""

from __future__ import annotations

import json
import re
import select
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from configs.paths import CONFIG_DIR
from configs.schema import TaskSpec
from configs.vocabulary.examples import Example
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.inputs.datasets import load_examples
from evaluator.pipeline import run_evaluation
from evaluator.runtimes.process import ProcessRuntime, free_port
from evaluator.tasks import load_tasks
from evaluator.transport.client import ModelClient, validate_predictions
from evaluator.transport.dialects import get_dialect
from evaluator.transport.endpoint import Endpoint
from store.blobs import LocalBlobStore
from tests.conftest import (
    DYNALAB2_SERVER,
    V1_SERVER,
    Server,
    gone,
    server_command,
    wait_until,
    with_limits,
)

SMALL_REPLY = 4096
WIRE_ID = re.compile(r"[0-9a-f]{20}")


@pytest.fixture
def examples(toy_task: TaskSpec, config_dir: Path) -> tuple[Example, ...]:
    return load_examples(toy_task, toy_task.rounds[0].datasets[0], config_dir)


@pytest.fixture
def strict_task(toy_task: TaskSpec) -> TaskSpec:
    """The toy task with small budgets so that failures come fast."""
    return with_limits(toy_task, startup_s=5.0, request_s=0.5, max_reply_bytes=SMALL_REPLY)


@pytest.fixture
def connect() -> Iterator[Callable[..., ModelClient]]:
    """``connect(endpoint, task, ready=True)``: a client (closed after the test)."""
    clients: list[ModelClient] = []

    def make(endpoint: Endpoint, task: TaskSpec, ready: bool = True) -> ModelClient:
        clients.append(ModelClient(endpoint, task, task.limits))
        if ready:
            clients[-1].wait_ready(5.0)
        return clients[-1]

    yield make
    for client in clients:
        client.close()


def expect_failure(code: FailureCode, call: Callable[[], object]) -> EvaluationError:
    with pytest.raises(EvaluationError) as info:
        call()
    assert info.value.code == code, info.value
    return info.value


def rule(claim: str) -> str:
    return "yes" if "she" in re.findall(r"[a-z]+", claim.lower()) else "no"


# -- good replies ---------------------------------------------------------------------------
def test_predictions_come_back_in_order_with_the_sent_uids(
    run_server: Callable[..., Server],
    connect: Callable[..., ModelClient],
    toy_task: TaskSpec,
    examples: Sequence[Example],
) -> None:
    client = connect(run_server(V1_SERVER, "rule").endpoint(), toy_task)
    predictions = client.predict(examples)
    assert [p.uid for p in predictions] == [e.uid for e in examples]
    assert [p.output for p in predictions] == [rule(e.inputs["claim"]) for e in examples]
    client.close()


@pytest.mark.parametrize("mode", ["openapi", "root_only"])
def test_dynalab2_readiness_and_answers_matched_by_position(
    run_server: Callable[..., Server],
    connect: Callable[..., ModelClient],
    toy_task: TaskSpec,
    examples: Sequence[Example],
    mode: str,
    tmp_path: Path,
) -> None:
    record = tmp_path / "requests.jsonl"
    server = run_server(DYNALAB2_SERVER, mode, "--record", str(record))
    client = connect(server.endpoint("dynalab2"), toy_task)
    predictions = client.predict(examples[:8])
    assert [p.uid for p in predictions] == [e.uid for e in examples[:8]]
    assert [p.output for p in predictions] == [rule(e.inputs["claim"]) for e in examples[:8]]
    sent = json.loads(record.read_text().splitlines()[0])
    assert sent == {"dataset_samples": [dict(e.inputs) for e in examples[:8]]}  # no uid


def test_dynalab2_wrong_count(
    run_server: Callable[..., Server],
    connect: Callable[..., ModelClient],
    toy_task: TaskSpec,
    examples: Sequence[Example],
) -> None:
    client = connect(run_server(DYNALAB2_SERVER, "wrong_count").endpoint("dynalab2"), toy_task)
    expect_failure(FailureCode.WRONG_COUNT, lambda: client.predict(examples[:4]))


def test_a_v1_model_is_not_ready_because_get_root_answers(
    run_server: Callable[..., Server], connect: Callable[..., ModelClient], toy_task: TaskSpec
) -> None:
    server = run_server(DYNALAB2_SERVER, "root_only")  # /health answers 404
    client = connect(server.endpoint("v1"), toy_task, ready=False)
    expect_failure(FailureCode.NEVER_HEALTHY, lambda: client.wait_ready(0.3))


def test_never_healthy_within_the_budget(
    run_server: Callable[..., Server], connect: Callable[..., ModelClient], toy_task: TaskSpec
) -> None:
    server = run_server(V1_SERVER, "never_healthy")
    client = connect(server.endpoint(), toy_task, ready=False)
    expect_failure(FailureCode.NEVER_HEALTHY, lambda: client.wait_ready(0.3))


def test_nothing_listening_is_never_healthy(
    connect: Callable[..., ModelClient], toy_task: TaskSpec
) -> None:
    client = connect(Endpoint("127.0.0.1", free_port()), toy_task, ready=False)
    expect_failure(FailureCode.NEVER_HEALTHY, lambda: client.wait_ready(0.3))


def test_a_dead_model_is_reported_crashed_while_waiting(
    connect: Callable[..., ModelClient], toy_task: TaskSpec
) -> None:
    client = connect(Endpoint("127.0.0.1", free_port()), toy_task, ready=False)
    expect_failure(FailureCode.CRASHED, lambda: client.wait_ready(5.0, alive=lambda: False))


def test_unknown_protocol_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown protocol 'grpc'"):
        get_dialect("grpc")
    with pytest.raises(ValueError, match="did you mean 'dynalab2'"):
        ProcessRuntime("true", protocol="dynalab")


def test_a_keep_alive_connection_the_model_closed_is_reopened(
    run_server: Callable[..., Server],
    connect: Callable[..., ModelClient],
    toy_task: TaskSpec,
    examples: Sequence[Example],
) -> None:
    """uvicorn closes idle keep-alive connections after 5 s; perturbing a round can take
    longer than that between two batches, and must not read as a crash."""
    client = connect(run_server(V1_SERVER, "idle_close").endpoint(), toy_task)
    assert len(client.predict(examples[:2])) == 2
    sock = client._conn.sock  # type: ignore[union-attr]
    wait_until(lambda: bool(select.select([sock], [], [], 0)[0]), 5.0, "the server to close")
    assert len(client.predict(examples[:2])) == 2


# -- bad replies, straight from the client --------------------------------------------------
BAD_REPLIES = [
    ("status_500", FailureCode.BAD_STATUS),
    ("not_json", FailureCode.BAD_JSON),
    ("wrong_shape", FailureCode.BAD_JSON),
    ("wrong_count", FailureCode.WRONG_COUNT),
    ("reorder", FailureCode.WRONG_ORDER),
    ("unknown_uid", FailureCode.BAD_PREDICTION),
    ("label_outside", FailureCode.LABEL_OUTSIDE_SET),
    ("missing_key", FailureCode.BAD_PREDICTION),
    ("huge_length", FailureCode.REPLY_TOO_LARGE),
    ("huge_chunked", FailureCode.REPLY_TOO_LARGE),
    ("huge_close", FailureCode.REPLY_TOO_LARGE),
    ("hang", FailureCode.REQUEST_TIMEOUT),
]


@pytest.mark.parametrize(("mode", "code"), BAD_REPLIES, ids=[m for m, _ in BAD_REPLIES])
def test_a_bad_reply_has_its_failure_code(
    run_server: Callable[..., Server],
    connect: Callable[..., ModelClient],
    strict_task: TaskSpec,
    examples: Sequence[Example],
    mode: str,
    code: FailureCode,
) -> None:
    client = connect(run_server(V1_SERVER, mode).endpoint(), strict_task)
    error = expect_failure(code, lambda: client.predict(examples[:4]))
    assert error.message and code.user_caused


def test_a_uid_echoed_as_a_number_is_a_bad_prediction_not_a_reordering(
    run_server: Callable[..., Server],
    connect: Callable[..., ModelClient],
    toy_task: TaskSpec,
    examples: Sequence[Example],
) -> None:
    client = connect(run_server(V1_SERVER, "int_uid").endpoint(), toy_task)
    expect_failure(FailureCode.BAD_PREDICTION, lambda: client.predict(examples[:1]))


# -- hostile replies -------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["trickle_headers", "trickle_body"])
def test_a_trickled_reply_times_out_at_the_request_deadline(
    run_server: Callable[..., Server],
    connect: Callable[..., ModelClient],
    toy_task: TaskSpec,
    examples: Sequence[Example],
    mode: str,
) -> None:
    """Each byte arrives well within the timeout, so a per-read timeout never fires; the
    whole reply would take most of a minute. Only a deadline for the whole exchange cuts it."""
    task = with_limits(toy_task, request_s=1.0)
    client = connect(run_server(V1_SERVER, mode, "--delay", "0.2").endpoint(), task)
    error = expect_failure(FailureCode.REQUEST_TIMEOUT, lambda: client.predict(examples[:4]))
    assert "did not complete within 1 s" in error.message


def test_the_deadline_thread_stops_on_close_and_restarts_on_use(
    run_server: Callable[..., Server],
    connect: Callable[..., ModelClient],
    toy_task: TaskSpec,
    examples: Sequence[Example],
) -> None:
    client = connect(run_server(V1_SERVER, "rule").endpoint(), toy_task)
    for _ in range(3):
        assert len(client.predict(examples[:4])) == 4
    thread = client._deadline._thread
    assert thread is not None and thread.is_alive()
    assert sum(t is thread for t in threading.enumerate()) == 1  # one per client, not per request
    client.close()
    wait_until(lambda: not thread.is_alive(), 5.0, "the request-deadline thread to end")
    assert len(client.predict(examples[:4])) == 4


def test_deeply_nested_json_is_bad_json_not_a_platform_fault(
    run_server: Callable[..., Server],
    connect: Callable[..., ModelClient],
    toy_task: TaskSpec,
    examples: Sequence[Example],
) -> None:
    client = connect(run_server(V1_SERVER, "deep_json").endpoint(), toy_task)
    expect_failure(FailureCode.BAD_JSON, lambda: client.predict(examples[:4]))


def test_any_error_reading_a_reply_is_blamed_on_the_reply(
    run_server: Callable[..., Server],
    connect: Callable[..., ModelClient],
    toy_task: TaskSpec,
    examples: Sequence[Example],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def explode(*args: object, **kwargs: object) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr("evaluator.transport.client.validate_predictions", explode)
    client = connect(run_server(V1_SERVER, "rule").endpoint(), toy_task)
    error = expect_failure(FailureCode.BAD_JSON, lambda: client.predict(examples[:4]))
    assert "RecursionError" in error.message


def test_probs_are_kept_only_as_a_flat_label_to_number_object(
    toy_task: TaskSpec, examples: Sequence[Example]
) -> None:
    deep: object = 0.5
    for _ in range(500):
        deep = [deep]
    items = [
        {"label": "yes", "probs": {"yes": 0.75, "no": 0.25}},
        {"label": "no", "probs": {"no": deep}},
        {"label": "no", "prob": 0.9},
    ]
    predictions = validate_predictions(toy_task, examples[:3], items)
    assert [p.probs for p in predictions] == [{"yes": 0.75, "no": 0.25}, None, None]
    assert [p.uid for p in predictions] == [e.uid for e in examples[:3]]


# -- the same failures through the pipeline and a ProcessRuntime ----------------------------
PIPELINE_FAILURES = [
    ("never_healthy", [], FailureCode.NEVER_HEALTHY, "mode=never_healthy"),
    ("exit_at_start", [], FailureCode.CRASHED, "fatal: cannot load weights"),
    ("status_500", [], FailureCode.BAD_STATUS, "mode=status_500"),
    ("not_json", [], FailureCode.BAD_JSON, "mode=not_json"),
    ("wrong_count", [], FailureCode.WRONG_COUNT, "mode=wrong_count"),
    ("reorder", [], FailureCode.WRONG_ORDER, "mode=reorder"),
    ("label_outside", [], FailureCode.LABEL_OUTSIDE_SET, "mode=label_outside"),
    ("huge_close", [], FailureCode.REPLY_TOO_LARGE, "mode=huge_close"),
    ("hang", [], FailureCode.REQUEST_TIMEOUT, "mode=hang"),
    ("die_after", ["--after", "1"], FailureCode.CRASHED, "fatal: dying on predict call 2"),
    ("spawn_child", [], FailureCode.LABEL_OUTSIDE_SET, "child pid="),
]


@pytest.mark.parametrize(
    ("mode", "args", "code", "log_line"), PIPELINE_FAILURES, ids=[f[0] for f in PIPELINE_FAILURES]
)
def test_the_pipeline_reports_the_code_and_log_and_leaves_no_process(
    strict_task: TaskSpec,
    config_dir: Path,
    blobs: LocalBlobStore,
    mode: str,
    args: list[str],
    code: FailureCode,
    log_line: str,
) -> None:
    value = ["--value", "perhaps"] if mode == "spawn_child" else []
    if mode == "never_healthy":
        strict_task = with_limits(strict_task, startup_s=0.5)
    runtime = ProcessRuntime(
        server_command(V1_SERVER, mode, *args, *value), limits=strict_task.limits
    )
    result = run_evaluation(strict_task, runtime, blobs, config_dir=config_dir)
    assert result.status == "failed" and result.failure is not None
    assert result.failure.code == code.value, result.failure
    assert result.failure.user_caused
    assert log_line in result.failure.log_tail
    assert result.scores == [] and result.summary == {}
    pids = [int(pid) for pid in re.findall(r"pid=(\d+)", result.failure.log_tail)]
    assert pids
    for pid in pids:
        wait_until(lambda pid=pid: gone(pid), 10.0, f"process {pid} to be gone")
    assert not runtime.alive()


def test_a_crash_says_how_the_model_exited(
    strict_task: TaskSpec, config_dir: Path, blobs: LocalBlobStore
) -> None:
    runtime = ProcessRuntime(server_command(V1_SERVER, "die_after", "--after", "1"))
    result = run_evaluation(strict_task, runtime, blobs, config_dir=config_dir)
    assert result.failure is not None and "exited with code 7" in result.failure.message


@pytest.mark.parametrize("mode", ["openapi", "root_only"])
def test_the_pipeline_speaks_dynalab2(
    toy_task: TaskSpec, config_dir: Path, blobs: LocalBlobStore, mode: str
) -> None:
    runtime = ProcessRuntime(server_command(DYNALAB2_SERVER, mode), protocol="dynalab2")
    result = run_evaluation(toy_task, runtime, blobs, config_dir=config_dir)
    assert result.status == "done", result.failure
    assert [row["performance"] for row in result.rounds] == [75.0, 60.0]


def test_dynalab2_wrong_count_through_the_pipeline(
    toy_task: TaskSpec, config_dir: Path, blobs: LocalBlobStore
) -> None:
    runtime = ProcessRuntime(server_command(DYNALAB2_SERVER, "wrong_count"), protocol="dynalab2")
    result = run_evaluation(toy_task, runtime, blobs, config_dir=config_dir)
    assert result.failure is not None and result.failure.code == FailureCode.WRONG_COUNT.value
    assert "mode=wrong_count" in result.failure.log_tail


# -- instances carry input fields only ------------------------------------------------------
SHIPPED = ["nli", "qa", "sentiment", "hate_speech"]


def _reply_for(task: TaskSpec) -> list[str]:
    if task.output_type == "answer":
        return ["--key", "answer", "--value", "an answer"]
    return ["--key", "label", "--value", task.labels[0]]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_input_field_and_nothing_else_reaches_the_model(
    run_server: Callable[..., Server],
    connect: Callable[..., ModelClient],
    tmp_path: Path,
    name: str,
) -> None:
    task = load_tasks()[name]
    examples = load_examples(task, task.rounds[0].datasets[0], CONFIG_DIR)[:10]
    record = tmp_path / "requests.jsonl"
    server = run_server(V1_SERVER, "echo", "--record", str(record), *_reply_for(task))
    predictions = connect(server.endpoint(), task).predict(examples)
    assert [p.uid for p in predictions] == [e.uid for e in examples]  # mapped back
    body = json.loads(record.read_text())
    assert body["task"] == name
    uids = {e.uid for e in examples}
    for sent, example in zip(body["instances"], examples, strict=True):
        assert set(sent) == {"uid", *task.input_fields}
        assert WIRE_ID.fullmatch(sent["uid"]) and sent["uid"] not in uids
        assert {k: sent[k] for k in task.input_fields} == dict(example.inputs)
        assert example.target not in (sent.get("label"), sent.get("answer"))
        assert not {"label", "answer", "answer_start", *task.slices} & set(sent)


def test_wire_ids_are_opaque_and_differ_per_pass_and_per_client(
    run_server: Callable[..., Server],
    connect: Callable[..., ModelClient],
    toy_task: TaskSpec,
    examples: Sequence[Example],
    tmp_path: Path,
) -> None:
    record = tmp_path / "requests.jsonl"
    endpoint = run_server(V1_SERVER, "rule", "--record", str(record)).endpoint()
    first, second = connect(endpoint, toy_task), connect(endpoint, toy_task)
    batch = list(examples[:4])
    for client, variant in ((first, "original"), (first, "typo"), (second, "original")):
        assert [p.uid for p in client.predict(batch, variant=variant)] == [e.uid for e in batch]
    first.predict([batch[0]] * 3, variant="profiling/0")  # one example repeated in a request
    sent = [
        [i["uid"] for i in json.loads(line)["instances"]]
        for line in record.read_text().splitlines()
    ]
    flat = [wire_id for request in sent for wire_id in request]
    assert all(WIRE_ID.fullmatch(wire_id) for wire_id in flat)
    assert len(set(flat)) == len(flat)  # original, perturbed, other evaluation, repeats
    assert not set(flat) & {e.uid for e in examples}


def test_nli_sends_context_and_hypothesis_in_dynalab2_too(
    run_server: Callable[..., Server], connect: Callable[..., ModelClient], tmp_path: Path
) -> None:
    task = load_tasks()["nli"]
    examples = load_examples(task, task.rounds[0].datasets[0], CONFIG_DIR)[:5]
    record = tmp_path / "requests.jsonl"
    server = run_server(DYNALAB2_SERVER, "openapi", "--record", str(record), *_reply_for(task))
    connect(server.endpoint("dynalab2"), task).predict(examples)
    samples = json.loads(record.read_text())["dataset_samples"]
    assert [set(s) for s in samples] == [{"context", "hypothesis"}] * 5
