"""Measurement fidelity: do the throughput and memory axes report what a model really does?

    python benchmarks/bench_fidelity.py [--quick] [--runs 5] [--runtimes url,process,docker]

Runs the calibration servers of examples/calibration/ (stdlib http.server, FastAPI/uvicorn,
Flask/werkzeug), whose truth is known: a busy service time per example (true throughput
1000 / service_ms examples/s) and a total resident size (300 MiB and 1 GiB). Each server
runs through each runtime (url: started here on 127.0.0.1; process; docker) and is evaluated
by the real pipeline (run_evaluation: readiness, a scoring pass, the profiling pass, the
memory sampler) ``--runs`` times, each on a fresh server. Prints JSON: per case the
measured/true ratios (every run must lie in 0.97-1.03 for throughput, 0.95-1.05 for memory),
the coefficient of variation over the runs (<= 3 %), and pass/fail. The url runtime has
no memory to measure (it never knows the model's process), so its memory is null.
The baseline measured in the same run is the calibration busy loop timed in-process.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from configs.schema import TaskSpec  # noqa: E402
from evaluator.pipeline import run_evaluation  # noqa: E402
from evaluator.runtimes.process import ProcessRuntime, free_port  # noqa: E402
from evaluator.runtimes.runtime import Runtime  # noqa: E402
from evaluator.runtimes.url import UrlRuntime  # noqa: E402
from evaluator.tasks import load_task  # noqa: E402
from evaluator.transport.quickack import rearm  # noqa: E402
from store.blobs import LocalBlobStore  # noqa: E402

CALIBRATION = REPO / "examples" / "calibration"
STYLES = ("stdlib", "fastapi", "flask")
RUNTIMES = ("url", "process", "docker")
THROUGHPUT_BOUNDS = (0.97, 1.03)
MEMORY_BOUNDS = (0.95, 1.05)
MAX_CV = 0.03
# The least a bare client may reach of the nominal rate and still set a test's truth (seen:
# 0.93-0.96 on a machine whose every request cost more than its service time).
LOWEST_TRUTH = 0.92
# What the test suite measures (tests/unit/test_calibration.py and its Docker twin): 16 ms
# per example, where a framework's own ~1-3 ms per batch of 32 is a small share of the 3 %
# band, so a CI machine's scheduling noise cannot push a correct measurement out of it; and
# the product's method of repeats with the median, shortened: 3 batches per offline pass.
# One hiccup in a single pass at 8 ms once read 0.958 on CI; with 3 repeats at 16 ms, the
# first Docker case once read 0.960 on a machine with slower container storage (the same
# case then read within the band three times in three runs). 5 repeats: two slow passes
# no longer move the median. The benchmark keeps 4 ms.
SUITE_SERVICE_MS = 16.0
SUITE_PROFILING: dict[str, Any] = {
    "repeats": 5,
    "min_examples": 96,
    "min_duration_s": 0.5,
    "min_queries": 8,
}
IMAGE_REPO = "dynaeval-calibration"
MIB = 1024 * 1024


@dataclass(frozen=True)
class Case:
    """One calibration server in one runtime, holding ``resident_mib``."""

    style: str
    runtime: str
    resident_mib: int
    service_ms: float = 4.0

    @property
    def true_examples_per_s(self) -> float:
        return 1000.0 / self.service_ms


@dataclass(frozen=True)
class Measurement:
    """What one evaluation reported: examples/s and average memory (None: not measured)."""

    examples_per_s: float
    memory_mib: float | None


# -- the servers --------------------------------------------------------------------------
def server_command(style: str, python: str = sys.executable) -> list[str]:
    """The command line of a calibration server run from the source tree."""
    return [python, str(CALIBRATION / f"{style}_server.py")]


def server_env(case: Case, host: str = "127.0.0.1") -> dict[str, str]:
    """The calibration knobs of ``case`` (see examples/calibration/calibration.py)."""
    return {
        "DYNAEVAL_CAL_SERVICE_MS": str(case.service_ms),
        "DYNAEVAL_CAL_RESIDENT_MIB": str(case.resident_mib),
        "DYNAEVAL_CAL_HOST": host,
    }


def image_tag(style: str) -> str:
    return f"{IMAGE_REPO}/{style}:latest"


def build_images(styles: Sequence[str]) -> None:
    """The base image (cached by content), then each style's image (Docker's cache)."""
    subprocess.run([str(REPO / "scripts/build-base-image.sh")], check=True, capture_output=True)
    for style in styles:
        subprocess.run(
            ["docker", "build", "--quiet", "--network", "none"]
            + ["-f", str(CALIBRATION / f"Dockerfile.{style}"), "-t", image_tag(style)]
            + [str(CALIBRATION)],
            check=True,
            capture_output=True,
        )


@contextlib.contextmanager
def url_server(case: Case) -> Iterator[str]:
    """A calibration server we start ourselves on 127.0.0.1, for the url runtime."""
    port = free_port()
    env = {**os.environ, **server_env(case), "PORT": str(port)}
    proc = subprocess.Popen(  # noqa: S603 - our own calibration server
        server_command(case.style),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def bare_client_rate(case: Case, batch_size: int, batches: int = 8, warmup: int = 2) -> float:
    """Examples/s a bare client reaches against a fresh server of ``case``'s style on this
    machine: one keep-alive connection, TCP_NODELAY, quick ACKs, one batch after another,
    the evaluator's method without the evaluator. Where the machine makes every request
    cost more than its service time (seen: 3.5-6 % more per batch for FastAPI and Flask
    on one virtual machine, where even this client saw 7 %), the nominal truth is out of
    anyone's reach, and what this client reaches is the truth a measurement can be held
    to."""
    body = json.dumps(
        {
            "task": "calibration",
            "instances": [
                {"uid": f"cal-{i}", "statement": f"calibration statement {i}"}
                for i in range(batch_size)
            ],
        }  # fmt: skip
    )
    headers = {"Content-Type": "application/json"}
    with url_server(replace(case, runtime="url")) as url:
        connection = _ready_connection(url)
        try:
            seconds = []
            for index in range(warmup + batches):
                started = time.perf_counter()
                if connection.sock is None:  # a server that closes after each reply
                    connection.connect()
                    connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                connection.request("POST", "/predict", body, headers)
                rearm(connection.sock)
                reply = connection.getresponse()
                reply.read()
                if connection.sock is not None:  # still open: keep-alive
                    rearm(connection.sock)
                if reply.status != 200:
                    raise RuntimeError(f"{case.style} server answered {reply.status}")
                if index >= warmup:
                    seconds.append(time.perf_counter() - started)
        finally:
            connection.close()
    return batch_size / statistics.median(seconds)  # the evaluator reports medians too


@dataclass(frozen=True)
class ThroughputWindow:
    """What a sound measurement of ``case`` may read on this machine: never above the
    nominal rate (3 % band), never below the nominal or, when less, what a bare client
    reaches against the same server (3 % band)."""

    nominal: float
    reachable: float

    @property
    def floor(self) -> float:
        """3 % below the lesser of the two, never below ``LOWEST_TRUTH`` of the nominal rate
        (a bare client slowed by a busy machine must not excuse any measurement)."""
        truth = max(min(self.nominal, self.reachable), self.nominal * LOWEST_TRUTH)
        return truth * THROUGHPUT_BOUNDS[0]

    @property
    def ceiling(self) -> float:
        return self.nominal * THROUGHPUT_BOUNDS[1]

    def holds(self, measured: float) -> bool:
        return self.floor <= measured <= self.ceiling

    def explain(self, measured: float) -> str:
        return (
            f"measured {measured:.2f}/s; nominal {self.nominal:.2f}/s, a bare client "
            f"{self.reachable:.2f}/s: allowed {self.floor:.2f}-{self.ceiling:.2f}/s"
        )


def throughput_window(case: Case, batch_size: int, measured: float) -> ThroughputWindow:
    """The window ``measured`` (``case``'s examples/s) is judged by: its bare client against
    a local process of its style. The truth is measured once per process for each server
    (style, service time, resident memory) and batch size, and shared by the runtimes that
    serve it (the suite's lane measured 7 truths for 4 servers, ~6 s each, in a lane that
    runs alone); a measurement that only a shared truth would let pass (below the nominal
    band) is judged by a truth measured again now instead, so one low reading taken at a
    slow moment never excuses another case."""
    key = _TruthKey(case.style, case.service_ms, case.resident_mib, batch_size)
    nominal = case.true_examples_per_s
    if key not in _TRUTHS or measured < nominal * THROUGHPUT_BOUNDS[0]:
        server = Case(key.style, "url", key.resident_mib, key.service_ms)
        _TRUTHS[key] = bare_client_rate(server, batch_size)
    return ThroughputWindow(nominal, _TRUTHS[key])


@dataclass(frozen=True)
class _TruthKey:
    """What a bare client's rate depends on: the server, and the requests' size."""

    style: str
    service_ms: float
    resident_mib: int
    batch_size: int


_TRUTHS: dict[_TruthKey, float] = {}


def _ready_connection(url: str, timeout_s: float = 60.0) -> http.client.HTTPConnection:
    """A connection to ``url``'s server once it answers ``/health``."""
    host, port = url.removeprefix("http://").split(":")
    deadline = time.monotonic() + timeout_s
    while True:
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            connection.request("GET", "/health")
            connection.getresponse().read()
            return connection
        except (OSError, http.client.HTTPException):  # not listening yet, or cut off
            connection.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@contextlib.contextmanager
def runtime_for(
    case: Case, task: TaskSpec, owner: str = "bench-fidelity", client: Any = None
) -> Iterator[Runtime]:
    """The runtime ``case`` names (started and stopped by the pipeline; a url server we
    started is stopped here). ``owner`` labels Docker objects; ``client``: the engine's."""
    if case.runtime == "url":
        with url_server(case) as url:
            yield UrlRuntime(url)
        return
    if case.runtime == "process":
        yield ProcessRuntime(server_command(case.style), limits=task.limits, env=server_env(case))
        return
    from evaluator.runtimes.docker.runtime import DockerRuntime  # needs the engine's SDK

    env = server_env(case, host="0.0.0.0")  # inside the sandbox: the guard's address
    yield DockerRuntime(
        image_tag(case.style), task.limits, client=client, label_owner=owner, env=env
    )


# -- the task -----------------------------------------------------------------------------
def calibration_task(
    config_dir: Path, *, examples: int = 64, batch_size: int = 32, **profiling: Any
) -> TaskSpec:
    """A one-round, three-label task without perturbations, written into ``config_dir``;
    ``profiling`` changes the profiling method's defaults (knobs it lacks are ignored)."""
    (config_dir / "datasets").mkdir(parents=True, exist_ok=True)
    (config_dir / "tasks").mkdir(exist_ok=True)
    labels = ("positive", "negative", "neutral")
    rows = [
        {"uid": f"cal-{i}", "statement": f"calibration statement {i}", "label": labels[i % 3]}
        for i in range(examples)
    ]
    (config_dir / "datasets" / "calibration.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in rows)
    )
    (config_dir / "tasks" / "calibration.yaml").write_text(
        "name: calibration\nversion: 1\ninput_fields: [statement]\n"
        "output: {type: label, labels: [positive, negative, neutral]}\n"
        f"metric: accuracy\nbatch_size: {batch_size}\nweights: {{performance: 1}}\n"
        "bootstrap: {n_resamples: 50, seed: 0}\n"
        "rounds:\n  - {name: r1, datasets: [{name: test, path: datasets/calibration.jsonl}]}\n"
    )
    task = load_task(config_dir / "tasks" / "calibration.yaml", config_dir)
    return replace(task, profiling=_tuned(task.profiling, **profiling))


def _tuned(spec: Any, **wanted: Any) -> Any:
    """``spec`` with those of ``wanted`` it has (the profiling spec may gain or lose knobs)."""
    names = {f.name for f in dataclasses.fields(spec)}
    return replace(spec, **{k: v for k, v in wanted.items() if k in names})


# -- measuring ----------------------------------------------------------------------------
def measure(
    case: Case, task: TaskSpec, config_dir: Path, owner: str = "bench-fidelity", client: Any = None
) -> Measurement:
    """One full evaluation of a fresh calibration server; raises if it did not finish."""
    blobs = LocalBlobStore(config_dir / "blobs")
    with runtime_for(case, task, owner, client) as runtime:
        result = run_evaluation(task, runtime, blobs, config_dir=config_dir)
    if result.status != "done" or result.failure is not None:
        failure = result.failure
        detail = f"{failure.code}: {failure.message}\n{failure.log_tail[-1500:]}" if failure else ""
        raise RuntimeError(f"{case} did not finish: {detail}")
    memory = result.profile.get("memory")
    return Measurement(
        float(result.profile["throughput"]["examples_per_s"]),
        float(memory["avg_gib"]) * 1024 if memory else None,
    )


def in_bounds(value: float, bounds: tuple[float, float]) -> bool:
    return bounds[0] <= value <= bounds[1]


def cv(values: Sequence[float]) -> float:
    """Coefficient of variation (sample standard deviation over the mean); 0 for one value."""
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0.0


def axis_report(values: Sequence[float], truth: float, bounds: tuple[float, float]) -> dict:
    """Per-run values, their measured/true ratios, the CV, and the verdict."""
    ratios = [v / truth for v in values]
    spread = cv(values)
    return {
        "runs": [round(v, 2) for v in values],
        "true": round(truth, 2),
        "median": round(statistics.median(values), 2),
        "ratio_median": round(statistics.median(ratios), 4),
        "ratio_min": round(min(ratios), 4),
        "ratio_max": round(max(ratios), 4),
        "cv": round(spread, 4),
        "pass": all(in_bounds(r, bounds) for r in ratios) and spread <= MAX_CV,
    }


def case_report(case: Case, runs: Sequence[Measurement], batch_size: int) -> dict:
    """The JSON entry of one case."""
    rates = [m.examples_per_s for m in runs]
    throughput = axis_report(rates, case.true_examples_per_s, THROUGHPUT_BOUNDS)
    # What each batch cost beyond its service time, as the evaluator saw it.
    overhead = [batch_size * 1000 * (1 / r - 1 / case.true_examples_per_s) for r in rates]
    throughput["overhead_ms_per_batch_median"] = round(statistics.median(overhead), 3)
    memories = [m.memory_mib for m in runs if m.memory_mib is not None]
    memory = axis_report(memories, case.resident_mib, MEMORY_BOUNDS) if memories else None
    passed = throughput["pass"] and (memory is None or memory["pass"])
    return {
        "style": case.style,
        "runtime": case.runtime,
        "resident_mib": case.resident_mib,
        "throughput_examples_per_s": throughput,
        "memory_mib": memory,
        "pass": passed,
    }


def busy_loop_baseline(service_ms: float, batch_size: int, batches: int = 5) -> dict:
    """The calibration loop timed in this process: the truth the servers are built on."""
    sys.path.insert(0, str(CALIBRATION))
    import calibration

    os.environ["DYNAEVAL_CAL_SERVICE_MS"] = str(service_ms)
    instances = [{"uid": str(i)} for i in range(batch_size)]
    seconds = []
    for _ in range(batches):
        started = time.perf_counter()
        calibration.predict(instances)
        seconds.append(time.perf_counter() - started)
    nominal = batch_size * service_ms / 1000
    return {
        "batch_ms_median": round(statistics.median(seconds) * 1000, 3),
        "ratio_to_nominal": round(statistics.median(seconds) / nominal, 5),
    }


def cases(
    styles: Sequence[str], runtimes: Sequence[str], residents: Sequence[int], service_ms: float
) -> list[Case]:
    """Every style × runtime × resident size (the url runtime once: it measures no memory)."""
    out: list[Case] = []
    for runtime in runtimes:
        sizes = residents[:1] if runtime == "url" else residents
        for style in styles:
            out.extend(Case(style, runtime, size, service_ms) for size in sizes)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 runs, 300 MiB only, shorter passes")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--runtimes", default=",".join(RUNTIMES))
    parser.add_argument("--styles", default=",".join(STYLES))
    parser.add_argument("--resident-mib", default="300,1024")
    parser.add_argument("--service-ms", type=float, default=4.0)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    runs = 3 if args.quick else args.runs
    residents = [int(x) for x in args.resident_mib.split(",")]
    residents = residents[:1] if args.quick else residents
    # The profiling method's own defaults; --quick times one repeat instead of three.
    profiling = {"repeats": 1} if args.quick else {}
    styles, runtimes = args.styles.split(","), args.runtimes.split(",")
    started = time.monotonic()
    if "docker" in runtimes:
        build_images(styles)
    reports = []
    with tempfile.TemporaryDirectory(prefix="dynaeval-fidelity-") as folder:
        config_dir = Path(folder)
        task = calibration_task(config_dir, batch_size=args.batch_size, **profiling)
        for case in cases(styles, runtimes, residents, args.service_ms):
            measured = [measure(case, task, config_dir) for _ in range(runs)]
            reports.append(case_report(case, measured, args.batch_size))
            print(json.dumps(reports[-1]), file=sys.stderr, flush=True)  # progress
    report = {
        "benchmark": "measurement_fidelity",
        "service_ms": args.service_ms,
        "true_examples_per_s": round(1000 / args.service_ms, 2),
        "batch_size": args.batch_size,
        "runs_per_case": runs,
        "targets": {
            "throughput_ratio": THROUGHPUT_BOUNDS,
            "memory_ratio": MEMORY_BOUNDS,
            "max_cv": MAX_CV,
        },
        "baseline_in_process_busy_loop": busy_loop_baseline(args.service_ms, args.batch_size),
        "cases": reports,
        "all_pass": all(r["pass"] for r in reports),
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
