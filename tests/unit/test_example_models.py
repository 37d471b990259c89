"""The example models in examples/models/ speak protocol v1 (and Dynalab 2.0) correctly."""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.slow  # measured, fuzzed or multi-process: the full lane only

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
START_TIMEOUT_S = 10.0

SENTIMENT = [
    {"uid": "s-1", "statement": "I absolutely loved this film, the acting was brilliant!"},
    {"uid": "s-2", "statement": "The food was not good and the service was terrible."},
    {"uid": "s-3", "statement": "The meeting is on Tuesday."},
]
NLI = [
    {
        "uid": "n-1",
        "context": "A man is playing a guitar on stage.",
        "hypothesis": "A man is playing a guitar.",
    },
    {"uid": "n-2", "context": "The shop was open all day.", "hypothesis": "The shop was closed."},
    {"uid": "n-3", "context": "A dog runs in the park.", "hypothesis": "The dog is chasing a cat."},
]
HATE = [
    {"uid": "h-1", "statement": "Immigrants are vermin and should be deported."},
    {"uid": "h-2", "statement": "I had a lovely walk by the river today."},
]
QA = [
    {
        "uid": "q-1",
        "context": "Marie Curie was born in Warsaw in 1867. She moved to Paris.",
        "question": "When was Marie Curie born?",
    },
    {
        "uid": "q-2",
        "context": "The bridge, built by Gustave Eiffel, has three spans.",
        "question": "How many spans does the bridge have?",
    },
]
LABELS = {
    "sentiment": {"positive", "negative", "neutral"},
    "nli": {"entailed", "neutral", "contradictory"},
    "hate_speech": {"hateful", "not-hateful"},
}
INSTANCES = {"sentiment": SENTIMENT, "nli": NLI, "hate_speech": HATE, "qa": QA}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A model process on a loopback port, with a keep-alive client connection."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int) -> None:
        self.proc = proc
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, object]:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        self.conn.request(method, path, body=body, headers=headers)
        resp = self.conn.getresponse()
        assert resp.getheader("Content-Length") is not None
        data = resp.read()
        return resp.status, json.loads(data) if data else None

    def predict(self, task: str, instances: list[dict]) -> list[dict]:
        body = json.dumps({"task": task, "instances": instances}).encode()
        status, reply = self.request("POST", "/predict", body)
        assert status == 200, reply
        assert isinstance(reply, dict)
        return reply["predictions"]


def _wait_healthy(proc: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"model exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            try:
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    return
            finally:
                conn.close()
        except OSError:
            time.sleep(0.02)
    raise AssertionError(f"model not healthy within {START_TIMEOUT_S}s")


@pytest.fixture
def start_model() -> Iterator[Callable[..., Server]]:
    """Start ``examples/models/<name>/model.py [args]``; every process is killed afterwards."""
    started: list[Server] = []

    def start(name: str, *args: str) -> Server:
        port = _free_port()
        env = {**os.environ, "PORT": str(port), "PYTHONDONTWRITEBYTECODE": "1"}
        proc = subprocess.Popen(
            [sys.executable, str(MODELS / name / "model.py"), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        server = Server(proc, port)
        started.append(server)
        _wait_healthy(proc, port)
        return server

    yield start
    for server in started:
        server.conn.close()
        server.proc.kill()
        server.proc.communicate(timeout=5)


MODEL_CASES = [
    ("majority", ["--label", "positive"], "sentiment"),
    ("majority", ["--label", "entailed"], "nli"),
    ("majority", ["--answer-first-words", "3"], "qa"),
    ("sentiment_lexicon", [], "sentiment"),
    ("nli_overlap", [], "nli"),
    ("qa_window", [], "qa"),
    ("hate_lexicon", [], "hate_speech"),
    ("null", ["--label", "not-hateful"], "hate_speech"),
    ("null", ["--answer", ""], "qa"),
    ("cpu_1ms", ["--label", "neutral"], "sentiment"),
]


@pytest.mark.parametrize(
    ("name", "args", "task"), MODEL_CASES, ids=[f"{n}-{t}" for n, _, t in MODEL_CASES]
)
def test_model_answers_one_prediction_per_instance(
    start_model: Callable[..., Server], name: str, args: list[str], task: str
) -> None:
    server = start_model(name, *args)
    instances = INSTANCES[task]
    predictions = server.predict(task, instances)
    assert [p["uid"] for p in predictions] == [i["uid"] for i in instances]
    for inst, pred in zip(instances, predictions, strict=True):
        if task == "qa":
            assert isinstance(pred["answer"], str)
            assert pred["answer"] in inst["context"]
        else:
            assert pred["label"] in LABELS[task]
            if "probs" in pred:
                assert set(pred["probs"]) == LABELS[task]
                assert abs(sum(pred["probs"].values()) - 1.0) < 1e-3
    # The same keep-alive connection keeps working, and answers are deterministic.
    assert server.predict(task, instances) == predictions
    assert server.predict(task, []) == []


def test_start_line_metadata_errors_and_keep_alive(start_model: Callable[..., Server]) -> None:
    server = start_model("null", "--label", "positive")
    assert server.proc.stdout is not None
    assert server.proc.stdout.readline().decode().startswith("serving null on port ")
    assert server.request("GET", "/health") == (200, {"status": "ok"})
    status, meta = server.request("GET", "/metadata")
    assert status == 200 and isinstance(meta, dict) and meta["name"] == "null"
    status, reply = server.request("POST", "/predict", b"{not json")
    assert status == 400 and isinstance(reply, dict) and "error" in reply
    status, _ = server.request("POST", "/predict", b'{"instances": 3}')
    assert status == 400
    assert server.request("GET", "/nope")[0] == 404
    assert server.request("POST", "/nope", b"{}")[0] == 404
    batch = [{"uid": f"u{i}", "statement": "x"} for i in range(32)]
    predictions = server.predict("sentiment", batch)
    assert predictions == [{"uid": f"u{i}", "label": "positive"} for i in range(32)]


def test_real_models_get_the_easy_cases_right(start_model: Callable[..., Server]) -> None:
    labels = [p["label"] for p in start_model("sentiment_lexicon").predict("sentiment", SENTIMENT)]
    assert labels == ["positive", "negative", "neutral"]
    labels = [p["label"] for p in start_model("nli_overlap").predict("nli", NLI)]
    assert labels == ["entailed", "contradictory", "neutral"]
    labels = [p["label"] for p in start_model("hate_lexicon").predict("hate_speech", HATE)]
    assert labels == ["hateful", "not-hateful"]
    answers = [p["answer"] for p in start_model("qa_window").predict("qa", QA)]
    assert answers == ["1867", "three"]


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sentiment_rules() -> None:
    sentiment = _load("example_sentiment", MODELS / "sentiment_lexicon" / "sentiment.py")
    scorer = sentiment.SentimentScorer()
    assert len(scorer.lexicon) >= 300
    assert scorer.score("good") > 0 > scorer.score("not good")
    assert scorer.score("very good") > scorer.score("good")
    assert scorer.score("good!") > scorer.score("good")
    assert scorer.predict("The plot was good but the acting was awful")[0] == "negative"
    assert scorer.predict("Although it started slowly, it was wonderful.")[0] == "positive"


def test_majority_first_words_is_a_substring() -> None:
    majority = _load("example_majority", MODELS / "majority" / "model.py")
    assert majority.first_words("  The  quick\tbrown fox", 3) == "The  quick\tbrown"
    assert majority.first_words("", 3) == ""


def test_cpu_model_burns_one_millisecond_per_example(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = _load("example_cpu_1ms", MODELS / "cpu_1ms" / "model.py")
    burnt: list[float] = []
    monkeypatch.setattr(cpu, "burn_cpu", burnt.append)
    replies = cpu.make_predict("positive", None, 1.0)("sentiment", [{"uid": "a"}, {"uid": "b"}])
    assert burnt == [pytest.approx(0.002)]
    assert replies == [{"uid": "a", "label": "positive"}, {"uid": "b", "label": "positive"}]


def test_cpu_burn_lasts_until_both_cpu_and_wall_time_have_passed() -> None:
    cpu = _load("example_cpu_1ms", MODELS / "cpu_1ms" / "model.py")
    now = {"cpu": 0.0, "wall": 0.0}

    def tick(clock: str, step: float) -> Callable[[], float]:
        def read() -> float:
            now[clock] += step
            return now[clock]

        return read

    # CPU time runs twice as fast as wall time here: the loop must wait for the slower one.
    cpu.burn_cpu(0.01, cpu_clock=tick("cpu", 0.002), wall_clock=tick("wall", 0.001))
    assert now["wall"] >= 0.011 and now["cpu"] >= 0.01


@pytest.mark.parametrize("layout", ["source-tree", "image"])
def test_dynalab2_app_scores_exactly_like_sentiment_lexicon(layout: str, tmp_path: Path) -> None:
    """Same model, two dialects: served by uvicorn, the FastAPI app answers every statement
    with sentiment_lexicon's label and probabilities. Run from the source tree, app/ holds no
    copy of the scorer (main.py loads ../sentiment_lexicon/); laid out like the image (the
    Dockerfile copies sentiment.py and lexicon.txt into /code/app/), it needs nothing else."""
    import shutil

    app_dir = MODELS / "dynalab2_sentiment" / "app"
    assert not (app_dir / "sentiment.py").exists() and not (app_dir / "lexicon.txt").exists()
    code = MODELS / "dynalab2_sentiment"
    if layout == "image":
        code = tmp_path / "code"
        shutil.copytree(app_dir, code / "app", ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("sentiment.py", "lexicon.txt"):
            shutil.copy(MODELS / "sentiment_lexicon" / name, code / "app" / name)
    samples: list[dict] = [{"statement": inst["statement"]} for inst in SENTIMENT]
    samples += [
        {"statement": "The plot was good but the acting was awful"},
        {"statement": "Although it started slowly, it was wonderful."},
        {"statement": "Not bad at all!"},
        {"statement": "It wasn't terrible, just slightly boring."},
        {"statement": "Very very good!!!"},
        {"statement": ""},
        {"text": "no statement field"},
    ]
    port = _free_port()
    serve = [sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1"]
    proc = subprocess.Popen(
        [*serve, "--port", str(port), "--log-level", "warning"],
        cwd=code,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    headers = {"Content-Type": "application/json"}

    def post(path: str, payload: object) -> object:
        conn.request("POST", path, json.dumps(payload), headers)
        resp = conn.getresponse()
        data = resp.read()
        assert resp.status == 200, data
        return json.loads(data)

    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert proc.poll() is None, proc.communicate()[0].decode()
            try:
                post("/model/single_evaluation", {})
                break
            except OSError:
                conn.close()
                assert time.monotonic() < deadline, "uvicorn did not answer in time"
                time.sleep(0.05)
        batch = post("/model/batch_evaluation", {"dataset_samples": samples})
        singles = [post("/model/single_evaluation", sample) for sample in samples]
    finally:
        conn.close()
        proc.kill()
        proc.communicate(timeout=5)
    sentiment = _load("example_sentiment", MODELS / "sentiment_lexicon" / "sentiment.py")
    scorer = sentiment.SentimentScorer()
    expected = []
    for sample in samples:
        label, probs = scorer.predict(sample.get("statement", ""))
        expected.append({"label": label, "prob": probs})
    assert {e["label"] for e in expected} == {"positive", "negative", "neutral"}
    assert batch == expected
    assert singles == expected


def test_dynalab2_app_scores_like_the_v1_lexicon_model(tmp_path: Path) -> None:
    """The FastAPI app, served by uvicorn and evaluated in the Dynalab 2.0 dialect, gives
    the same sentiment results as the protocol-v1 model sharing its lexicon and scorer."""
    from configs.paths import CONFIG_DIR
    from evaluator.pipeline import run_evaluation
    from evaluator.runtimes.process import ProcessRuntime
    from evaluator.tasks import load_task
    from store.blobs import LocalBlobStore
    from tests.unit.test_dynalab_single import quick_profile

    task = quick_profile(load_task(CONFIG_DIR / "tasks" / "sentiment.yaml"))  # scores only
    blobs = LocalBlobStore(tmp_path / "blobs")
    serve = 'exec "$0" -m uvicorn app.main:app --host 127.0.0.1 --port "$PORT" --log-level warning'
    dynalab = ProcessRuntime(
        ["sh", "-c", serve, sys.executable], protocol="dynalab2", cwd=MODELS / "dynalab2_sentiment"
    )
    v1 = ProcessRuntime([sys.executable, str(MODELS / "sentiment_lexicon" / "model.py")])
    results = [run_evaluation(task, runtime, blobs) for runtime in (dynalab, v1)]
    assert [r.failure for r in results] == [None, None]
    values = [{s.key: s.value for s in r.scores} for r in results]
    assert values[0] == values[1]
