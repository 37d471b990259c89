"""Evaluation overhead of the full prediction path (batching, HTTP, JSON, reply validation,
budget checks, scoring) against a null model and a model that needs 1 ms of CPU per example.

Prints one JSON object. Baselines are measured in the same run: a bare keep-alive HTTP loop
(TCP_NODELAY) posting the same payloads to the same model without batching logic,
validation, budgets or memory sampling. "Added time" is the pipeline's time over that
floor; the 1 ms model is also compared with the same CPU work done in-process, batch by
batch (what the model's own HTTP server costs is shown there, not charged to us). Targets: >= 20,000 examples/s with the null
model at batch 32; <= 2 % added time for the 1 ms model.

    python benchmarks/bench_pipeline.py [--examples 40000] [--cpu-examples 3000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "models" / "cpu_1ms"))

from configs.paths import CONFIG_DIR  # noqa: E402
from configs.vocabulary.examples import Example  # noqa: E402
from configs.vocabulary.results import ScoreKey  # noqa: E402
from evaluator.pipeline import Evaluation  # noqa: E402
from evaluator.runtimes.process import ProcessRuntime  # noqa: E402
from evaluator.scoring.variants import performance_score  # noqa: E402
from evaluator.tasks import load_task  # noqa: E402
from store.blobs import LocalBlobStore  # noqa: E402


def synthetic(n: int) -> list[Example]:
    """``n`` sentiment examples cycling the shipped round-1 statements (unique uids)."""
    rows = [json.loads(line) for line in (CONFIG_DIR / "datasets/sentiment/r1.jsonl").open()]
    return [
        Example(
            f"bench-{i:07d}",
            {"statement": rows[i % len(rows)]["statement"]},
            rows[i % len(rows)]["label"],
        )
        for i in range(n)
    ]


def model_runtime(script: str, *args: str) -> ProcessRuntime:
    return ProcessRuntime([sys.executable, str(ROOT / "examples/models" / script), *args])


def full_path(task, runtime: ProcessRuntime, examples: list[Example], blobs) -> dict:  # type: ignore[no-untyped-def]
    """Time Evaluation.predict_all (+ scoring) on a started model."""
    evaluation = Evaluation(task, runtime, blobs)
    evaluation.started_at = time.monotonic()
    evaluation.deadline = evaluation.started_at + 3600
    evaluation.start_model()
    try:
        base = ScoreKey(task.name, "bench", "bench", "-")
        evaluation.predict_all(examples[: task.batch_size * 4], base, "warmup")
        started = time.perf_counter()
        predictions = evaluation.predict_all(examples, base, "original")
        predicted = time.perf_counter()
        performance_score(task, base, examples, predictions)
        scored = time.perf_counter()
        return {
            "predict_s": predicted - started,
            "score_s": scored - predicted,
            "port": evaluation.client.endpoint.port if evaluation.client else None,
        }
    finally:
        evaluation.stop_model()


def bare_http(task, runtime: ProcessRuntime, examples: list[Example]) -> float:  # type: ignore[no-untyped-def]
    """The same POSTs over one keep-alive connection, no validation: the floor."""
    endpoint = runtime.start()
    try:
        from evaluator.transport.client import ModelClient

        ModelClient(endpoint, task, task.limits).wait_ready(30)
        conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=30)
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        size = task.batch_size
        bodies = [
            json.dumps(
                {
                    "task": task.name,
                    "instances": [
                        e.request_instance(f"w{i + j}")
                        for j, e in enumerate(examples[i : i + size])
                    ],
                }
            ).encode()
            for i in range(0, len(examples), size)
        ]
        started = time.perf_counter()
        for body in bodies:
            conn.request("POST", "/predict", body, {"Content-Type": "application/json"})
            json.loads(conn.getresponse().read())
        elapsed = time.perf_counter() - started
        conn.close()
        return elapsed
    finally:
        runtime.stop()


def in_process_cpu(examples: list[Example], batch_size: int) -> float:
    from model import burn_cpu  # examples/models/cpu_1ms/model.py

    started = time.perf_counter()
    for i in range(0, len(examples), batch_size):
        burn_cpu(0.001 * len(examples[i : i + batch_size]))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=40000)
    parser.add_argument("--cpu-examples", type=int, default=3000)
    args = parser.parse_args()
    task = load_task(CONFIG_DIR / "tasks" / "sentiment.yaml")
    blobs = LocalBlobStore(tempfile.mkdtemp(prefix="dynaeval-bench-"))
    examples = synthetic(args.examples)

    null = full_path(task, model_runtime("null/model.py"), examples, blobs)
    floor = bare_http(task, model_runtime("null/model.py"), examples)
    null_rate = args.examples / null["predict_s"]

    cpu_examples = examples[: args.cpu_examples]
    cpu = full_path(task, model_runtime("cpu_1ms/model.py"), cpu_examples, blobs)
    cpu_floor = bare_http(task, model_runtime("cpu_1ms/model.py"), cpu_examples)
    cpu_baseline = in_process_cpu(cpu_examples, task.batch_size)
    added = cpu["predict_s"] / cpu_floor - 1

    report = {
        "batch_size": task.batch_size,
        "null_model": {
            "examples": args.examples,
            "examples_per_s": round(null_rate),
            "bare_http_examples_per_s": round(args.examples / floor),
            "full_path_vs_bare_http_time_ratio": round(null["predict_s"] / floor, 3),
            "scoring_s": round(null["score_s"], 4),
            "target_examples_per_s": 20000,
            "meets_target": null_rate >= 20000,
        },
        "cpu_1ms_model": {
            "examples": args.cpu_examples,
            "pipeline_s": round(cpu["predict_s"], 4),
            "bare_http_s": round(cpu_floor, 4),
            "in_process_compute_s": round(cpu_baseline, 4),
            "added_time_percent": round(100 * added, 2),
            "added_vs_in_process_compute_percent": round(
                100 * (cpu["predict_s"] / cpu_baseline - 1), 2
            ),
            "target_added_percent": 2.0,
            "meets_target": added <= 0.02,
        },
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
