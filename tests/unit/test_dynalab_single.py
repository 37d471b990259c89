"""Dynabench's single-example route (``POST /model/single_evaluation``) in the dynalab2 dialect.

A stdlib server in this process stands in for a Dynabench template: it serves only the
single route, one flat example per request. The client finds the route from the model's
OpenAPI document or from the batch route's 404/405, sends every example alone (never a
label), keeps to its concurrency bound, folds label case only when unambiguous, keeps
``prob``, and maps every bad reply to its failure code. Then the template-shaped FastAPI app
in examples/models/dynabench_nli scores exactly like its protocol-v1 twin, nli_overlap.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from configs.paths import CONFIG_DIR
from configs.schema import TaskSpec
from configs.vocabulary.examples import Example
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.inputs.datasets import load_examples
from evaluator.pipeline import Evaluation, run_evaluation
from evaluator.runtimes.process import ProcessRuntime
from evaluator.tasks import load_task
from evaluator.transport.client import ModelClient
from evaluator.transport.dialects import get_dialect
from evaluator.transport.endpoint import Endpoint
from evaluator.transport.replies import label_folding
from store.blobs import LocalBlobStore
from tests.conftest import with_limits

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
SINGLE = "/model/single_evaluation"
BATCH = "/model/batch_evaluation"
Answer = Callable[[dict], Any]  # sample -> reply object, or (status, raw bytes)


def rule(sample: dict) -> dict:
    words = re.findall(r"[a-z]+", str(sample.get("claim", "")).lower())
    label = "yes" if "she" in words else "no"
    return {"label": label, "prob": {label: 0.9, "maybe": 0.1}}


def openapi(*paths: str) -> dict:
    """An OpenAPI document declaring POST on ``paths`` (FastAPI's shape, trimmed)."""
    return {"openapi": "3.1.0", "paths": {p: {"post": {"summary": p}} for p in paths}}


@dataclass
class Model:
    """What the stand-in model serves and saw."""

    document: dict | None = None  # /openapi.json (None: 404)
    batch_status: int = 404  # the batch route's answer (200: served)
    answer: Answer = rule
    delay_s: float = 0.0
    posts: list[tuple[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


Serve = Callable[..., tuple[Model, Endpoint]]  # serve(**Model fields) -> (model, endpoint)
Connect = Callable[..., ModelClient]  # connect(endpoint, task, **client options), ready


def handler_for(model: Model) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

        def send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/openapi.json" and model.document is not None:
                self.send(200, json.dumps(model.document).encode())
            else:
                self.send(404, b'{"detail": "Not Found"}')

        def do_POST(self) -> None:
            sample = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with model.lock:
                model.posts.append((self.path, sample))
            if self.path == BATCH and model.batch_status == 200:
                self.send(
                    200, json.dumps([model.answer(s) for s in sample["dataset_samples"]]).encode()
                )
            elif self.path == SINGLE:
                self.single(sample)
            else:
                self.send(model.batch_status, b'{"detail": "Method Not Allowed or Not Found"}')

        def single(self, sample: dict) -> None:
            with model.lock:
                model.in_flight += 1
                model.most_in_flight = max(model.most_in_flight, model.in_flight)
            try:
                time.sleep(model.delay_s)
                reply = model.answer(sample)
            finally:
                with model.lock:
                    model.in_flight -= 1
            if reply == "drop":
                self.close_connection = True  # no answer at all: the connection just ends
            elif isinstance(reply, tuple):
                self.send(*reply)
            else:
                self.send(200, json.dumps(reply).encode())

    return Handler


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up on a reply (the timeout tests) is expected here."""


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve(**Model fields)``: the stand-in model on a free loopback port."""
    servers: list[ThreadingHTTPServer] = []

    def start(**fields: Any) -> tuple[Model, Endpoint]:
        model = Model(**fields)
        server = QuietServer(("127.0.0.1", 0), handler_for(model))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return model, Endpoint("127.0.0.1", server.server_address[1], get_dialect("dynalab2"))

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def connect() -> Iterator[Connect]:
    clients: list[ModelClient] = []

    def make(endpoint: Endpoint, task: TaskSpec, **options: Any) -> ModelClient:
        clients.append(ModelClient(endpoint, task, task.limits, **options))
        clients[-1].wait_ready(5.0)
        return clients[-1]

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def examples(toy_task: TaskSpec, config_dir: Path) -> tuple[Example, ...]:
    return load_examples(toy_task, toy_task.rounds[0].datasets[0], config_dir)


def expect(code: FailureCode, call: Callable[[], object]) -> EvaluationError:
    with pytest.raises(EvaluationError) as info:
        call()
    assert info.value.code is code, info.value
    return info.value


def expected(examples: Sequence[Example]) -> list[str]:
    return [rule(dict(e.inputs))["label"] for e in examples]


# -- finding the route -----------------------------------------------------------------------
def test_the_openapi_document_names_the_single_route(
    serve: Serve, connect: Connect, toy_task: TaskSpec, examples: Sequence[Example]
) -> None:
    model, endpoint = serve(document=openapi(SINGLE, "/"))
    client = connect(endpoint, toy_task)
    assert client.one_example_per_request  # known from the document, before any example
    predictions = client.predict(examples[:6])
    assert [p.output for p in predictions] == expected(examples[:6])
    assert [p.uid for p in predictions] == [e.uid for e in examples[:6]]
    # Never the batch route; one flat example per request: its input fields, nothing else.
    assert model.posts == [(SINGLE, dict(e.inputs)) for e in examples[:6]]
    assert all(set(body) == {"premise", "claim"} for _, body in model.posts)


def test_a_document_with_both_routes_means_batches(
    serve: Serve, connect: Connect, toy_task: TaskSpec, examples: Sequence[Example]
) -> None:
    model, endpoint = serve(document=openapi(SINGLE, BATCH), batch_status=200)
    client = connect(endpoint, toy_task)
    assert [p.output for p in client.predict(examples[:6])] == expected(examples[:6])
    assert [path for path, _ in model.posts] == [BATCH]
    assert not client.one_example_per_request


@pytest.mark.parametrize("status", [404, 405])
def test_without_a_document_a_missing_batch_route_falls_back_once(
    serve: Serve,
    connect: Connect,
    toy_task: TaskSpec,
    examples: Sequence[Example],
    status: int,
) -> None:
    model, endpoint = serve(batch_status=status)  # ready by "GET / answers at all"
    client = connect(endpoint, toy_task)
    assert not client.one_example_per_request  # not known yet
    for start in (0, 4):
        batch = examples[start : start + 4]
        assert [p.output for p in client.predict(batch)] == expected(batch)
    assert client.one_example_per_request
    paths = [path for path, _ in model.posts]
    assert paths == [BATCH] + [SINGLE] * 8  # the batch route is asked once, never again


def test_a_model_with_neither_route_is_a_bad_status(
    serve: Serve, connect: Connect, toy_task: TaskSpec, examples: Sequence[Example]
) -> None:
    _, endpoint = serve(answer=lambda sample: (404, b'{"detail": "Not Found"}'))
    client = connect(endpoint, toy_task)
    error = expect(FailureCode.BAD_STATUS, lambda: client.predict(examples[:2]))
    assert SINGLE in error.message and "404" in error.message


def test_a_batch_route_the_document_declares_is_not_second_guessed(
    serve: Serve, connect: Connect, toy_task: TaskSpec, examples: Sequence[Example]
) -> None:
    _, endpoint = serve(document=openapi(BATCH), batch_status=404)
    client = connect(endpoint, toy_task)
    expect(FailureCode.BAD_STATUS, lambda: client.predict(examples[:2]))


# -- what is accepted ------------------------------------------------------------------------
def cased(transform: Callable[[str], str]) -> Answer:
    def answer(sample: dict) -> dict:
        reply = rule(sample)
        return {**reply, "label": transform(reply["label"])}

    return answer


@pytest.mark.parametrize("transform", [str.capitalize, str.upper], ids=["Yes", "YES"])
def test_label_case_is_folded_to_the_tasks_labels(
    serve: Serve,
    connect: Connect,
    toy_task: TaskSpec,
    examples: Sequence[Example],
    transform: Callable[[str], str],
) -> None:
    _, endpoint = serve(document=openapi(SINGLE), answer=cased(transform))
    predictions = connect(endpoint, toy_task).predict(examples[:6])
    assert [p.output for p in predictions] == expected(examples[:6])


def test_label_case_is_not_folded_when_that_would_be_a_guess(
    serve: Serve, connect: Connect, toy_task: TaskSpec, examples: Sequence[Example]
) -> None:
    assert label_folding(["yes", "YES", "no"]) == {"no": "no"}
    task = replace(toy_task, labels=("yes", "YES", "no", "maybe"))
    _, endpoint = serve(document=openapi(SINGLE), answer=cased(str.capitalize))
    client = connect(endpoint, task)
    first_yes = next(e for e in examples if rule(dict(e.inputs))["label"] == "yes")
    expect(FailureCode.LABEL_OUTSIDE_SET, lambda: client.predict([first_yes]))


def test_prob_is_kept_and_an_unreadable_one_ignored(
    serve: Serve, connect: Connect, toy_task: TaskSpec, examples: Sequence[Example]
) -> None:
    _, endpoint = serve(document=openapi(SINGLE))
    predictions = connect(endpoint, toy_task).predict(examples[:2])
    assert [p.probs for p in predictions] == [rule(dict(e.inputs))["prob"] for e in examples[:2]]
    _, endpoint = serve(document=openapi(SINGLE), answer=lambda s: {**rule(s), "prob": 0.7})
    assert [p.probs for p in connect(endpoint, toy_task).predict(examples[:2])] == [None, None]


# -- concurrency -----------------------------------------------------------------------------
def test_one_request_at_a_time_by_default(
    serve: Serve, connect: Connect, toy_task: TaskSpec, examples: Sequence[Example]
) -> None:
    model, endpoint = serve(document=openapi(SINGLE), delay_s=0.01)
    client = connect(endpoint, toy_task)
    assert client.concurrency == 1
    client.predict(examples[:8])
    assert model.most_in_flight == 1


def test_a_higher_concurrency_is_a_bound_and_keeps_the_order(
    serve: Serve, connect: Connect, toy_task: TaskSpec, examples: Sequence[Example]
) -> None:
    model, endpoint = serve(document=openapi(SINGLE), delay_s=0.05)
    client = connect(endpoint, toy_task, concurrency=3)
    predictions = client.predict(examples[:12])
    assert [p.uid for p in predictions] == [e.uid for e in examples[:12]]
    assert [p.output for p in predictions] == expected(examples[:12])
    assert model.most_in_flight == 3


def test_after_a_failure_no_further_request_is_sent(
    serve: Serve, connect: Connect, toy_task: TaskSpec, examples: Sequence[Example]
) -> None:
    def answer(sample: dict) -> Any:
        return (500, b"boom") if sample == dict(examples[2].inputs) else rule(sample)

    model, endpoint = serve(document=openapi(SINGLE), delay_s=0.02, answer=answer)
    client = connect(endpoint, toy_task, concurrency=2)
    expect(FailureCode.BAD_STATUS, lambda: client.predict(examples[:16]))
    assert len(model.posts) <= 5  # the two in flight may finish; nothing new starts


# -- failures --------------------------------------------------------------------------------
BAD = [
    ("status_500", lambda s: (500, b"Internal Server Error"), FailureCode.BAD_STATUS),
    ("status_422", lambda s: (422, b'{"detail": "field required"}'), FailureCode.BAD_STATUS),
    ("not_json", lambda s: (200, b"label=yes"), FailureCode.BAD_JSON),
    ("a_list", lambda s: [rule(s)], FailureCode.BAD_JSON),
    ("nested_json", lambda s: (200, b"[" * 4000), FailureCode.BAD_JSON),
    ("no_label", lambda s: {"prob": {"yes": 1.0}}, FailureCode.BAD_PREDICTION),
    ("wrapped", lambda s: {"message": rule(s)}, FailureCode.BAD_PREDICTION),
    ("number_label", lambda s: {"label": 1}, FailureCode.BAD_PREDICTION),
    ("outside", lambda s: {"label": "entailed"}, FailureCode.LABEL_OUTSIDE_SET),
    ("huge", lambda s: {"label": "yes", "pad": "x" * 8192}, FailureCode.REPLY_TOO_LARGE),
    ("hang", lambda s: time.sleep(2) or rule(s), FailureCode.REQUEST_TIMEOUT),
    ("drop", lambda s: "drop", FailureCode.CRASHED),
]


@pytest.mark.parametrize(("answer", "code"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_single_reply_has_its_failure_code(
    serve: Serve,
    connect: Connect,
    toy_task: TaskSpec,
    examples: Sequence[Example],
    answer: Answer,
    code: FailureCode,
) -> None:
    task = with_limits(toy_task, request_s=0.5, max_reply_bytes=4096)
    _, endpoint = serve(document=openapi(SINGLE), answer=answer)
    error = expect(code, lambda: connect(endpoint, task).predict(examples[:3]))
    assert error.message and code.user_caused


def test_the_total_deadline_cuts_a_request_in_flight(
    serve: Serve, connect: Connect, toy_task: TaskSpec, examples: Sequence[Example]
) -> None:
    _, endpoint = serve(document=openapi(SINGLE), delay_s=0.2)
    client = connect(endpoint, toy_task)
    started = time.monotonic()
    call = lambda: client.predict(examples[:8], timeout=5.0, total_deadline=started + 0.5)  # noqa: E731
    expect(FailureCode.TOTAL_TIMEOUT, call)
    assert time.monotonic() - started < 1.5


# -- the template-shaped example, end to end -------------------------------------------------
def dynabench_nli_runtime(code: Path = MODELS / "dynabench_nli") -> ProcessRuntime:
    """examples/models/dynabench_nli (from ``code``) served as its image serves it."""
    serve = 'exec "$0" -m uvicorn app.app:app --host 127.0.0.1 --port "$PORT" --log-level warning'
    return ProcessRuntime(
        ["sh", "-c", serve, sys.executable],
        protocol="dynalab2",
        cwd=code,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
    )


def quick_profile(task: TaskSpec) -> TaskSpec:
    """``task`` with a short profiling pass (it measures, it does not score)."""
    short = {"warmup_batches": 1, "min_examples": 32, "min_queries": 8, "min_duration_s": 0.05}
    known = {k: v for k, v in short.items() if hasattr(task.profiling, k)}
    return replace(task, profiling=replace(task.profiling, **known))


def test_the_dynabench_template_scores_exactly_like_its_protocol_v1_twin(tmp_path: Path) -> None:
    """Same rule, two packagings: every score of every round, dataset and variant equal."""
    task = quick_profile(load_task(CONFIG_DIR / "tasks" / "nli.yaml"))
    blobs = LocalBlobStore(tmp_path / "blobs")
    template = Evaluation(task, dynabench_nli_runtime(), blobs)
    single = template.run()
    twin = run_evaluation(
        task, ProcessRuntime([sys.executable, str(MODELS / "nli_overlap" / "model.py")]), blobs
    )
    assert [single.failure, twin.failure] == [None, None]
    assert template.client is not None and template.client.one_example_per_request
    assert single.profile["throughput"]["mode"] == "single_stream"  # reported as what it is
    assert {s.key: s.value for s in single.scores} == {s.key: s.value for s in twin.scores}
    per_round = [{r["round"]: r["performance"] for r in res.rounds} for res in (single, twin)]
    assert per_round[0] == per_round[1] and len(per_round[0]) == len(task.rounds)


def test_laid_out_as_in_its_image_the_template_needs_nothing_else(tmp_path: Path) -> None:
    """The Dockerfile's layout (app/, nli_overlap's files in app/resources/), served the way
    the image serves it, answers each example with nli_overlap's label and probabilities."""
    code = tmp_path / "model"
    shutil.copytree(MODELS / "dynabench_nli" / "app", code / "app")
    resources = code / "app" / "resources"
    (resources / "nli_overlap").mkdir(parents=True)
    for name in ("model.py", "antonyms.txt"):
        shutil.copy(MODELS / "nli_overlap" / name, resources / "nli_overlap" / name)
    shutil.copy(MODELS / "dynaeval_server.py", resources)
    runtime = dynabench_nli_runtime(code)
    task = load_task(CONFIG_DIR / "tasks" / "nli.yaml")
    examples = load_examples(task, task.rounds[1].datasets[0], CONFIG_DIR)[:20]
    client = ModelClient(runtime.start(), task, task.limits)
    try:
        client.wait_ready(10.0, runtime.alive)
        predictions = client.predict(examples)
        assert client.one_example_per_request
    finally:
        client.close()
        runtime.stop()
    spec = importlib.util.spec_from_file_location("nli_rule", MODELS / "nli_overlap" / "model.py")
    assert spec is not None and spec.loader is not None
    twin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(twin)
    rule_of = [twin.classify(e.inputs["context"], e.inputs["hypothesis"]) for e in examples]
    assert [(p.output, p.probs) for p in predictions] == rule_of
