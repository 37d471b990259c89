"""One worker process of the chaos test: ``dynaeval worker`` with a short lease.

    python -m tests.chaos.run_worker --db URL --data DIR --config-dir DIR --id ID \\
        --events FILE [--lease-s 3] [--heartbeat-s 0.5] [--poll-s 0.2] [--grace-s 5]

It assembles the worker as the CLI does (``Service.open``: migrations, tasks registered),
installs the same signal handling (SIGTERM and SIGINT stop the worker gracefully), and runs
until stopped. Its log goes to stderr (the test sends it to a file). Besides, it writes one
JSON line per queue operation to ``--events`` (claims, heartbeats, outcomes, hand-backs, with
the process id and the wall time), so the test can tell which process held which attempt.
Exit status: 0 after a graceful stop, 3 when the service could not be opened.

The test starts these processes through a fork server that has imported everything once
(``PRELOAD``, ``forked_main``): a fresh interpreter spends seconds of CPU importing the
evaluator's scientific stack, and the test restarts workers a dozen times on two cores. A
forked worker runs the same ``main`` in a new session, its output in its log file.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from configs.vocabulary.jobs import RetryPolicy
from store.jobs import JobStore

log = logging.getLogger("chaos.worker")

# The queue operations whose calls and answers the event log records.
TRACED = ("claim", "heartbeat", "finish", "finish_late", "fail", "release", "settle_predecessor")


class EventLog:
    """Appends one JSON object per line, flushed at once (a SIGKILL loses at most a line)."""

    def __init__(self, path: Path, slot: str) -> None:
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self.slot = slot

    def write(self, event: str, **fields: Any) -> None:
        record = {"t": time.time(), "pid": os.getpid(), "slot": self.slot, "event": event}
        record.update(fields)
        line = json.dumps(record, default=str)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()


def _describe(value: Any) -> Any:
    """A queue operation's argument or answer as plain data (a claimed job by its fields)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: getattr(value, f.name)
            for f in dataclasses.fields(value)
            if f.name not in ("runtime",)
        }
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def _job_id(args: tuple[Any, ...]) -> str | None:
    for value in args:
        if isinstance(value, str):
            return value
        job_id = getattr(value, "id", None)
        if isinstance(job_id, str):
            return job_id
    return None


def traced_store(store: JobStore, events: EventLog) -> JobStore:
    """``store`` with every traced operation logged (call, answer or exception)."""

    def wrap(name: str) -> Any:
        original = getattr(store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            job_id, t0 = _job_id(args), time.time()
            try:
                answer = original(*args, **kwargs)
            except BaseException as exc:
                error = f"{type(exc).__name__}: {exc}"[:300]
                events.write(name, t0=t0, job=job_id, error=error)
                raise
            events.write(name, t0=t0, job=job_id, answer=_describe(answer))
            return answer

        return call

    for name in TRACED:
        if hasattr(store, name):
            setattr(store, name, wrap(name))  # an instance attribute shadows the method
    return store


class _Signals:
    """``dynaeval worker``'s signal handling where the CLI has none to reuse: SIGTERM and
    SIGINT stop the worker gracefully."""

    def __init__(self, first: Callable[[], None]) -> None:
        self.first = first

    def install(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda received, frame: self.first())

    def done(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, signal.SIG_IGN)


def cli_signals(grace_s: float, first: Callable[[], None], now: Callable[[], None]) -> Any:
    """The signal handling ``dynaeval worker`` installs (client.commands.StopSignals: the
    first signal stops taking jobs and gives the running one ``grace_s``, a second hands it
    back at once), or the plain equivalent where the CLI offers none."""
    try:
        from client.commands import StopSignals  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return _Signals(first)
    return StopSignals("worker", grace_s, first, now)


def cli_waits_for_the_database() -> bool:
    """Whether ``dynaeval worker`` waits for an unreachable database when it starts
    (worker.outage.open_when_reachable around opening the service), so this process does
    what the CLI does: wait, or fail and exit."""
    try:
        from client import commands, common

        paths = (commands.cmd_worker, common.open_service)
        return any("open_when_reachable" in inspect.getsource(path) for path in paths)
    except (ImportError, AttributeError, OSError, TypeError):
        return False


# What the fork server imports before it forks workers (everything a worker runs).
PRELOAD = [
    "tests.chaos.run_worker",
    "usecases.service",
    "worker.worker",
    "evaluator.pipeline",
    "evaluator.runtimes.process",
    "client.commands",
]


def forked_main(argv: list[str], log_path: str, env: dict[str, str]) -> None:
    """A worker forked by the test's fork server: its own session (like a process the test
    started), stdout and stderr into ``log_path``, ``env`` on top of the environment."""
    os.setsid()
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.update(env)
    sys.exit(main(argv))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--config-dir", required=True, type=Path)
    parser.add_argument("--id", required=True)
    parser.add_argument("--slot", default="")
    parser.add_argument("--events", required=True, type=Path)
    parser.add_argument("--lease-s", type=float, default=3.0)
    parser.add_argument("--heartbeat-s", type=float, default=0.5)
    parser.add_argument("--poll-s", type=float, default=0.2)
    parser.add_argument("--grace-s", type=float, default=5.0)
    parser.add_argument("--retry-first-s", type=float, default=0.5)
    parser.add_argument("--retry-max-s", type=float, default=2.0)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s.%(msecs)03d %(process)d %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        force=True,
    )
    events = EventLog(args.events, args.slot or args.id)
    events.write("start", worker=args.id)

    from usecases.service import Service
    from worker.worker import Worker

    def open_service() -> Service:
        return Service.open(args.data, args.db, config_dir=args.config_dir)

    # As cmd_worker: the signals are handled from the start; one that comes while the
    # service is still opening (the database may be down) ends the wait.
    stopping = threading.Event()
    started: list[Worker] = []

    def stop(now: bool) -> None:
        stopping.set()
        for worker in started:
            worker.stop(now=now) if now else worker.stop()

    signals = cli_signals(args.grace_s, lambda: stop(False), lambda: stop(True))
    signals.install()
    try:
        if cli_waits_for_the_database():
            from worker.outage import open_when_reachable

            service = open_when_reachable(
                open_service, worker_id=args.id, poll_s=args.poll_s, stopping=stopping
            )
        else:
            service = open_service()
    except Exception as exc:  # what `dynaeval worker` would end with (there: a traceback)
        signals.done()
        if stopping.is_set():
            events.write("exit", stats=None)
            return 0
        error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        log.error("could not open the service: %s", error)
        events.write("open_failed", error=error)
        return 3
    options: dict[str, Any] = {
        "worker_id": args.id,
        "lease_s": args.lease_s,
        "heartbeat_s": args.heartbeat_s,
        "poll_s": args.poll_s,
        "config_dir": service.config_dir,
        "retry_policy": RetryPolicy(first_delay_s=args.retry_first_s, max_delay_s=args.retry_max_s),
    }
    if "grace_s" in inspect.signature(Worker).parameters:
        options["grace_s"] = args.grace_s
    store = traced_store(service.store, events)
    worker = Worker(store, service.blobs, service.tasks, **options)
    started.append(worker)
    if stopping.is_set():
        worker.stop()
    try:
        stats = worker.work()
    finally:
        signals.done()
        service.db.dispose()
    events.write("exit", stats=_describe(stats))
    log.info("worker %s stopped: %s", args.id, stats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
