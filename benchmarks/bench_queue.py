"""Time the job queue itself; print JSON.

Two measurements, on a SQLite file and (when Debian's PostgreSQL server is installed) on a
throwaway PostgreSQL cluster (tests/postgres.py):

* ``claim``: 1,000 queued jobs drained by 8 concurrent claimer threads; every claim's
  latency (p50, p99, in ms). The baseline, measured in the same run on the same backend, is
  one claimer draining 1,000 jobs alone; ``p50_ratio`` / ``p99_ratio`` are to it. Every job
  must be claimed exactly once. On PostgreSQL the tables are analysed once filled, as
  autovacuum does in a running service.
* ``throughput``: 300 trivial jobs drained by 1, 2 and 4 worker threads (real ``Worker``
  loops, leases, heartbeat threads and outcome transactions; the evaluation is a stub that
  returns a finished result at once, so this measures the queue). Jobs per minute, and
  ``scaling`` = jobs per minute over the 1-worker run's.
* ``fair_share``: one submitter queues 200 jobs; 2 workers run them, ``JOB_S`` each; after
  3 job-lengths a second submitter queues 2. Each job's wait from being queued to its start,
  in job-lengths: the second submitter's (target: each at most 1) and, as the baseline
  from the same run, the median of the flood's jobs that started meanwhile.

Usage: ``python benchmarks/bench_queue.py [--jobs N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from configs.vocabulary.results import EvaluationResult  # noqa: E402
from store.blobs import LocalBlobStore  # noqa: E402
from store.db import Database  # noqa: E402
from store.jobs import ClaimedJob, JobStore  # noqa: E402
from worker.progress import Progress  # noqa: E402
from worker.worker import Worker  # noqa: E402

CLAIM_JOBS = 1_000
CLAIMERS = 8
THROUGHPUT_JOBS = 300
WORKER_COUNTS = (1, 2, 4)
RUNTIME = {"kind": "url", "url": "http://127.0.0.1:9", "protocol": "v1"}
FLOOD, FEW, FAIR_WORKERS, JOB_S = 200, 2, 2, 0.2


class InstantWorker(Worker):
    """A worker whose evaluation is free: what remains is the queue's own cost."""

    def evaluate(self, job: ClaimedJob, progress: Progress) -> EvaluationResult:
        return EvaluationResult(job.task, "done", summary={"performance": 1.0})

    def clean_leftovers(self) -> None:  # no container engine involved
        pass


def fill(store: JobStore, count: int) -> None:
    for i in range(count):
        store.submit("toy", f"m{i}", RUNTIME)


def analyze(store: JobStore) -> None:
    """Give PostgreSQL's planner statistics of the filled queue, as autovacuum keeps them in
    a running service (a table filled a moment ago has none, and the planner then reads
    the whole history of jobs for the fair-share counts)."""
    if store.db.engine.dialect.name == "postgresql":
        with store.db.engine.begin() as connection:
            connection.exec_driver_sql("ANALYZE")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def drain(store: JobStore, claimers: int) -> tuple[list[float], list[str]]:
    """Claim until the queue is empty with ``claimers`` threads; each claim's seconds."""
    latencies: list[float] = []
    claimed: list[str] = []
    lock = threading.Lock()

    def claimer(index: int) -> None:
        while True:
            start = time.perf_counter()
            job = store.claim(f"bench-{index}", 600)
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)
                if job is not None:
                    claimed.append(job.id)
            if job is None:
                return

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(claimers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, claimed


def claim_latency(new_store: Callable[[], JobStore], jobs: int) -> dict[str, Any]:
    runs: dict[str, dict[str, float]] = {}
    for claimers in (1, CLAIMERS):
        store = new_store()
        fill(store, jobs)
        analyze(store)
        latencies, claimed = drain(store, claimers)
        assert len(claimed) == len(set(claimed)) == jobs, "a job was claimed twice or lost"
        runs[str(claimers)] = {
            "p50_ms": round(statistics.median(latencies) * 1000, 3),
            "p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
        }
        store.db.dispose()
    base, busy = runs["1"], runs[str(CLAIMERS)]
    return {
        "jobs": jobs,
        "claimers": CLAIMERS,
        "baseline_1_claimer": base,
        "concurrent": busy,
        "p50_ratio": round(busy["p50_ms"] / base["p50_ms"], 2),
        "p99_ratio": round(busy["p99_ms"] / base["p99_ms"], 2),
    }


def jobs_per_minute(store: JobStore, workers: int, jobs: int, blobs: Path) -> float:
    fill(store, jobs)
    pool = [
        InstantWorker(
            store, LocalBlobStore(blobs), {}, worker_id=f"bench-{workers}-{i}", poll_s=0.01
        )
        for i in range(workers)
    ]
    threads = [threading.Thread(target=w.work, kwargs={"burst": True}) for w in pool]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    assert sum(w.stats.done for w in pool) == jobs, "not every job was done exactly once"
    return jobs / elapsed * 60


def throughput(new_store: Callable[[], JobStore], jobs: int, blobs: Path) -> dict[str, Any]:
    rates = {}
    for workers in WORKER_COUNTS:
        store = new_store()
        rates[str(workers)] = round(jobs_per_minute(store, workers, jobs, blobs), 1)
        store.db.dispose()
    return {
        "jobs": jobs,
        "jobs_per_minute": rates,
        "scaling": {k: round(v / rates["1"], 2) for k, v in rates.items()},
    }


def fair_share(new_store: Callable[[], JobStore]) -> dict[str, Any]:
    """How long a second submitter's 2 jobs wait behind a first one's 200 (see above)."""
    from store.accounts import Accounts

    store = new_store()
    owners = [Accounts(store.db).add_user(n, "researcher")["id"] for n in ("flood", "few")]
    queued_at: dict[str, float] = {}
    started_at: dict[str, float] = {}
    lock, stop = threading.Lock(), threading.Event()

    def submit(owner: str, n: int) -> list[str]:
        ids = []
        for i in range(n):
            _, job_id = store.submit("toy", f"m{i}", RUNTIME, owner_id=owner)
            with lock:
                queued_at[job_id] = time.perf_counter()
            ids.append(job_id)
        return ids

    def worker(index: int) -> None:
        done = EvaluationResult("toy", "done", summary={"performance": 1.0})
        while not stop.is_set():
            job = store.claim(f"fair-{index}", 600)
            if job is None:
                return
            with lock:
                started_at[job.id] = time.perf_counter()
            time.sleep(JOB_S)
            store.finish(job.id, f"fair-{index}", done, lease=job.lease)

    flood = submit(owners[0], FLOOD)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(FAIR_WORKERS)]
    for thread in threads:
        thread.start()
    time.sleep(3 * JOB_S)
    few = submit(owners[1], FEW)
    deadline = time.perf_counter() + 30 * JOB_S
    while time.perf_counter() < deadline and not all(j in started_at for j in few):
        time.sleep(JOB_S / 10)
    stop.set()
    for thread in threads:
        thread.join()
    store.db.dispose()
    assert all(j in started_at for j in few), "the second submitter's jobs never started"
    waits = [(started_at[j] - queued_at[j]) / JOB_S for j in few]
    flood_waits = [(started_at[j] - queued_at[j]) / JOB_S for j in flood if j in started_at]
    return {
        "flood_jobs": FLOOD,
        "few_jobs": FEW,
        "workers": FAIR_WORKERS,
        "job_s": JOB_S,
        "few_wait_job_lengths": [round(w, 2) for w in waits],
        "target_job_lengths": 1.0,
        "baseline_flood_median_wait_job_lengths": round(statistics.median(flood_waits), 2),
        "ratio": round(max(waits) / statistics.median(flood_waits), 3),
    }


@contextlib.contextmanager
def postgres() -> Iterator[Callable[[], str] | None]:
    """A factory of fresh PostgreSQL databases, or None without a server."""
    from tests.postgres import running_cluster, server_bin

    if server_bin() is None:
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix="dynaeval-pg-"))
    with running_cluster(root) as cluster, contextlib.ExitStack() as stack:

        def fresh() -> str:
            return stack.enter_context(cluster.fresh_database())

        yield fresh


def backend(name: str, url: Callable[[], str], folder: Path, args: argparse.Namespace) -> dict:
    def new_store() -> JobStore:
        store = JobStore(Database(url()))
        store.register_task("toy", 1, {})
        return store

    return {
        "backend": name,
        "claim": claim_latency(new_store, args.claim_jobs),
        "throughput": throughput(new_store, args.jobs, folder / "blobs"),
        "fair_share": fair_share(new_store),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=THROUGHPUT_JOBS)
    parser.add_argument("--claim-jobs", type=int, default=CLAIM_JOBS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dynaeval-bench-queue-") as tmp:
        folder = Path(tmp)
        os.environ["DYNAEVAL_LOCK_DIR"] = str(folder / "locks")
        counter = iter(range(1_000_000))

        def sqlite_url() -> str:
            return f"sqlite:///{folder / f'queue-{next(counter)}.sqlite3'}"

        report = [backend("sqlite", sqlite_url, folder, args)]
        with postgres() as pg_url:
            if pg_url is not None:
                report.append(backend("postgresql", pg_url, folder, args))
    print(json.dumps({"queue": report}, indent=2))


if __name__ == "__main__":
    main()
