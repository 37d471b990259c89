"""Time a backfill: a new round on a task with many scored models, drained by 1 and 4
workers; print JSON.

For each worker count, a fresh ``Service`` on a small sentiment task (one round of 20
examples, small profiling, no perturbations) gets ``--models`` scored models (a hand-made
finished result on the task's data as it is). Every model's runtime is a ``url`` model
on 127.0.0.1 served by one in-process HTTP server that answers protocol v1 at once, so
the workers really call a model over HTTP. A new round of 20 examples is added through
the API's own code path (``usecases.rounds.add_dataset``), which queues one backfill job per
model; then N real ``Worker`` loops in threads (burst mode) drain them. The baseline is
the 1-worker run of the same process: ``scaling`` is 4 workers' jobs per minute over it.
An untimed run of 2 models first loads what evaluation imports lazily. The workers run
twice: as threads of one process (CPU-bound scoring, the slice metrics, shares one
interpreter lock), and as separate processes on the same database, the way an operator
runs ``dynaeval worker`` once per core (each process opens its service before the clock
starts). ``scaling`` is the processes' ratio, ``thread_scaling`` the threads'.
Every model must get exactly one backfill job and every one must be done (exit 1 if not).
The machine's load average is printed before and after, since other runs may share it.

Usage: ``python benchmarks/bench_backfill.py [--models N]``.
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from configs.paths import CONFIG_DIR  # noqa: E402
from configs.vocabulary.results import EvaluationResult, Score, ScoreKey  # noqa: E402
from store.models import JobRow, ScoreRow  # noqa: E402
from usecases.rounds import Upload, add_dataset  # noqa: E402
from usecases.service import Service  # noqa: E402
from worker.worker import Worker  # noqa: E402

MODELS = 200
WORKER_COUNTS = (1, 4)
ROWS = 20  # examples in the first round and in the new one
TASK = "sentiment"
SOURCE = CONFIG_DIR / "datasets/sentiment/r1.jsonl"
SMALL_TASK = {
    "name": TASK,
    "version": 1,
    "input_fields": ["statement"],
    "output": {"type": "label", "labels": ["positive", "negative", "neutral"]},
    "metric": "macro_f1",
    "slices": ["topic"],
    "rounds": [{"name": "r1", "datasets": [{"name": "test", "path": "datasets/s/r1.jsonl"}]}],
    "perturbations": {"robustness": [], "fairness": []},
    # the test configs' style: a profiling pass of a few requests, not seconds
    "profiling": {"warmup_batches": 0, "min_examples": 8, "min_queries": 4, "repeats": 1,
                  "min_duration_s": 0.01, "sample_interval_s": 0.01},
    "bootstrap": {"n_resamples": 20, "seed": 0},
}  # fmt: skip


class BenchWorker(Worker):
    """A real worker loop; only its Docker preparation is skipped (no engine is involved,
    and a CI run on the same machine may be checking for leftover containers)."""

    def clean_leftovers(self) -> None:
        pass


class FastModel(BaseHTTPRequestHandler):
    """Protocol v1: ``GET`` is healthy, ``POST`` labels every instance ``positive``."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:  # quiet: 200 models' requests
        pass

    def _send(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"status": "ok"})

    def do_POST(self) -> None:
        assert isinstance(self.server, ModelServer)
        self.server.count()
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self._send({"predictions": [{"uid": i["uid"], "label": "positive"} for i in payload["instances"]]})  # fmt: skip


class ModelServer(ThreadingHTTPServer):
    """The one loopback server of every model; counts the predictions asked of it."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), FastModel)
        self.predictions = 0
        self._lock = threading.Lock()

    def count(self) -> None:
        with self._lock:
            self.predictions += 1

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextmanager
def model_server() -> Iterator[ModelServer]:
    """The server, running; a thread per connection so the workers' keep-alive
    connections do not wait for each other."""
    server = ModelServer()
    thread = threading.Thread(target=server.serve_forever, name="fast-model", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def jsonl_rows(start: int, count: int) -> str:
    """``count`` lines of the shipped sentiment round from line ``start``."""
    return "".join(SOURCE.read_text(encoding="utf-8").splitlines(keepends=True)[start:][:count])


def small_config(root: Path) -> Path:
    """A config folder with the shared defaults and one small sentiment task."""
    (root / "tasks").mkdir(parents=True)
    (root / "datasets" / "s").mkdir(parents=True)
    shutil.copy(CONFIG_DIR / "defaults.yaml", root / "defaults.yaml")
    (root / "datasets/s/r1.jsonl").write_text(jsonl_rows(0, ROWS), encoding="utf-8")
    (root / "tasks" / f"{TASK}.yaml").write_text(yaml.safe_dump(SMALL_TASK), encoding="utf-8")
    return root


def seed_scored(service: Service, runtime: dict[str, Any], count: int) -> list[str]:
    """``count`` models with a finished result on the task's data as it is now."""
    hashes = dict(service.dataset_hashes(TASK))
    store, models = service.store, []
    for index in range(count):
        model_id, job_id = store.submit(TASK, f"fast-{index:04d}", runtime)
        claimed = store.claim("bench-seed", 60)
        assert claimed is not None and claimed.id == job_id, "the seed job was not next"
        result = EvaluationResult(
            task=TASK,
            status="done",
            summary={"performance": 50.0, "metric": "macro_f1"},
            rounds=[{"round": "r1", "performance": 50.0, "performance_ci": None}],
            scores=[Score(ScoreKey(TASK, "r1", "test", hashes["r1/test"]), 50.0, ROWS)],
            provenance={"code_version": "bench", "dataset_hashes": hashes},
        )
        assert store.finish(job_id, "bench-seed", result, lease=claimed.lease)
        models.append(model_id)
    return models


def add_round(service: Service) -> list[str]:
    """A new round of ``ROWS`` examples through the API's code path; its backfill jobs."""
    data = jsonl_rows(ROWS, ROWS).encode()
    upload = Upload("r2", "test", io.BytesIO(data), "r2.jsonl", new_round=True)
    change = add_dataset(service, service.tasks[TASK], upload)
    assert change.created, "the new round was not created"
    return list(change.backfill_jobs)


def drain(service: Service, workers: int) -> tuple[float, int]:
    """Seconds for ``workers`` burst-mode worker threads to empty the queue; jobs done."""
    pool = [
        BenchWorker(
            service.store,
            service.blobs,
            service.tasks,
            worker_id=f"bench-backfill-{workers}-{i}",
            poll_s=0.01,
            config_dir=service.config_dir,
        )
        for i in range(workers)
    ]
    threads = [threading.Thread(target=w.work, kwargs={"burst": True}) for w in pool]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start, sum(w.stats.done for w in pool)


def problems(service: Service, models: list[str], backfills: list[str]) -> list[str]:
    """What went wrong: a model without exactly one backfill job, a job not done."""
    with service.db.session() as session:
        rows = session.execute(
            select(JobRow.id, JobRow.model_id, JobRow.status).where(JobRow.id.in_(backfills))
        ).all()
        rescored = set(
            session.scalars(select(ScoreRow.model_id).where(ScoreRow.round == "r2").distinct())
        )
    found: list[str] = []
    per_model = [row.model_id for row in rows]
    if len(backfills) != len(models) or sorted(per_model) != sorted(models):
        found.append(f"{len(backfills)} backfill jobs for {len(models)} models")
    found += [f"job {row.id} is {row.status}" for row in rows if row.status != "done"]
    if rescored != set(models):  # each backfill stored scores on the new round
        found.append(f"{len(set(models) - rescored)} models have no score on the new round")
    return found


def _process_worker(folder: str, name: str, go: Any, done: Any) -> None:
    """A worker process: open the service, wait for the start, drain, report jobs done."""
    service = Service.open(Path(folder) / "data", config_dir=Path(folder) / "configs")
    try:
        worker = BenchWorker(
            service.store, service.blobs, service.tasks, worker_id=name, poll_s=0.01,
            config_dir=service.config_dir,
        )  # fmt: skip
        go.wait()
        done.put(worker.work(burst=True).done)
    finally:
        service.close()


def drain_processes(folder: Path, workers: int) -> tuple[float, int]:
    """Seconds for ``workers`` burst-mode worker processes to empty the queue; jobs done."""
    context = multiprocessing.get_context("fork")
    go, done = context.Event(), context.Queue()
    processes = [
        context.Process(
            target=_process_worker, args=(str(folder), f"bench-proc-{workers}-{i}", go, done)
        )
        for i in range(workers)
    ]
    for process in processes:
        process.start()
    time.sleep(2.0)  # every process has opened its service (untimed)
    start = time.perf_counter()
    go.set()
    finished = sum(done.get(timeout=600) for _ in processes)
    elapsed = time.perf_counter() - start
    for process in processes:
        process.join(timeout=60)
    return elapsed, finished


def run(
    folder: Path, model: ModelServer, workers: int, models: int, processes: bool = False
) -> tuple[float, list[str]]:
    """One fresh service: seed, add a round, drain with ``workers`` (threads, or processes);
    (seconds, problems)."""
    service = Service.open(folder / "data", config_dir=small_config(folder / "configs"))
    try:
        runtime = {"kind": "url", "url": model.url, "protocol": "v1"}
        seeded = seed_scored(service, runtime, models)
        backfills = add_round(service)
        asked = model.predictions
        if processes:
            seconds, done = drain_processes(folder, workers)
        else:
            seconds, done = drain(service, workers)
        found = problems(service, seeded, backfills)
        if done != len(backfills):
            found.append(f"the workers finished {done} jobs, not {len(backfills)}")
        if model.predictions - asked < len(backfills):  # at least one request per job
            found.append(f"the model answered {model.predictions - asked} requests")
        return seconds, found
    finally:
        service.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=MODELS)
    args = parser.parse_args()
    load_before = [round(x, 2) for x in os.getloadavg()]
    seconds: dict[str, float] = {}
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="dynaeval-bench-backfill-") as tmp:
        os.environ["DYNAEVAL_LOCK_DIR"] = str(Path(tmp) / "locks")
        with model_server() as model:
            # untimed: the first job imports what evaluation loads lazily (fairlearn, ...),
            # which would otherwise be charged to the 1-worker baseline alone
            failures += [f"warm-up: {p}" for p in run(Path(tmp) / "warm", model, 1, 2)[1]]
            for mode in ("threads", "processes"):
                for workers in WORKER_COUNTS:
                    folder = Path(tmp) / f"{mode}-{workers}"
                    elapsed, found = run(folder, model, workers, args.models, mode == "processes")
                    seconds[f"{workers} {mode}"] = round(elapsed, 2)
                    failures += [f"{workers} {mode}: {problem}" for problem in found]
    rates = {k: round(args.models / v * 60, 1) for k, v in seconds.items()}
    report = {
        "models": args.models,
        "seconds": seconds,
        "jobs_per_minute": rates,
        "scaling": round(rates["4 processes"] / rates["1 processes"], 2),
        "thread_scaling": round(rates["4 threads"] / rates["1 threads"], 2),
        "loadavg_before": load_before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "cpu_count": os.cpu_count(),
        "failures": failures,
    }
    print(json.dumps({"backfill": report}, indent=2))
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
