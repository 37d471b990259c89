"""What each ``dynaeval`` sub-command does (argument parsing lives in ``client.cli``)."""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from client import render
from client.accounts import cmd_login, cmd_tokens, cmd_users, serve_access  # noqa: F401
from client.common import CliError, all_tasks, find_task, open_service
from client.progress import ProgressBar, progress_wanted
from client.signals import StopSignals
from client.submit import cmd_submit  # noqa: F401 - dispatched by name from client.cli
from configs.logsetup import configure_logging
from configs.schema import TaskSpec
from evaluator.runtimes.specs import DockerSpec, ProcessSpec, RuntimeSpec, UrlSpec

if TYPE_CHECKING:
    pass

BOARDS_KEPT_S = 30.0  # how long a stopping serve waits for its boards to be kept


# -- tasks -----------------------------------------------------------------------------------
def cmd_tasks(args: argparse.Namespace) -> int:
    tasks = all_tasks()
    if args.json:
        render.emit_json([task.public_dict() for task in tasks.values()])
        return 0
    rows = [
        [
            t.name,
            len(t.rounds),
            ", ".join(t.input_fields),
            ", ".join(t.labels) or t.output_key,
            t.metric,
        ]
        for t in tasks.values()
    ]
    print(render.table(["task", "rounds", "inputs", "labels", "metric"], rows))
    return 0


# -- evaluate --------------------------------------------------------------------------------
def guess_runtime(model: str) -> str:
    if model.startswith("http://"):
        return "url"
    if model.endswith(".py") or " " in model.strip():
        return "process"
    return "docker"


def _looks_like_path(model: str) -> bool:
    first = shlex.split(model)[0] if model.strip() else model
    return first.endswith((".py", ".tar", ".tar.gz", ".tgz")) or first.startswith(
        ("./", "/", "../")
    )


def runtime_spec(model: str, kind: str, protocol: str) -> RuntimeSpec:
    if kind == "url":
        return UrlSpec(url=model, protocol=protocol)
    if kind == "process":
        single_script = model.endswith(".py") and not any(c.isspace() for c in model)
        command = (sys.executable, model) if single_script else tuple(shlex.split(model))
        return ProcessSpec(command=command, protocol=protocol)
    return DockerSpec(image=model, protocol=protocol)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from evaluator.pipeline import run_evaluation
    from evaluator.runtimes.factory import make_runtime
    from store.blobs import default_blob_store

    task = find_task(args.task)
    kind = args.runtime or guess_runtime(args.model)
    if kind != "url" and _looks_like_path(args.model) and not Path(args.model).exists():
        raise CliError(f"no such file or directory: {args.model}")
    blobs = default_blob_store()
    try:
        runtime = make_runtime(runtime_spec(args.model, kind, args.protocol), task.limits, blobs)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    except Exception as exc:  # image could not be loaded / built / pulled
        code = getattr(getattr(exc, "code", None), "value", "start_failed")
        return _report_failure(args, task, code, getattr(exc, "message", str(exc)))
    # A progress bar on a terminal (not with --json, not in pipes); -v logs steps otherwise.
    with ProgressBar(task.name, enabled=progress_wanted(args.json)) as bar:
        progress: Callable[[float, str], None] | None = bar.update if bar.enabled else None
        if progress is None and args.verbose and not args.json:
            progress = _progress_printer()
        result = run_evaluation(
            task, runtime, blobs, progress=progress, save_predictions=args.save_predictions
        ).to_dict()
    _add_overall_ci(result)
    if args.json:
        render.emit_json(result)
    else:
        print(render.evaluation(result))
    if result["status"] != "done":
        return 1
    if args.fail_under is not None and result["performance"] < args.fail_under:
        print(
            f"performance {result['performance']:.2f} is under {args.fail_under}", file=sys.stderr
        )
        return 1
    return 0


def _add_overall_ci(result: dict[str, Any]) -> None:
    result.setdefault("performance_ci", None)


def _report_failure(args: argparse.Namespace, task: TaskSpec, code: str, message: str) -> int:
    result = {
        "task": task.name,
        "status": "failed",
        "failure": {"code": code, "message": message, "log_tail": ""},
    }
    if args.json:
        render.emit_json(result)
    else:
        print(render.evaluation(result))
    return 1


def _progress_printer() -> Callable[[float, str], None]:
    def show(fraction: float, stage: str) -> None:
        print(f"[{fraction * 100:5.1f}%] {stage}", file=sys.stderr, flush=True)

    return show


# -- dynascore -------------------------------------------------------------------------------
def cmd_dynascore(args: argparse.Namespace) -> int:
    import pandas as pd  # imported here: every other command starts faster without it

    from dynascore import AXES, DEFAULT_INSTANCE_MEMORY_GIB, compute
    from dynascore.weights import Weights

    try:
        table = pd.read_csv(args.csv)
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read {args.csv}: {exc}") from None
    missing = [c for c in ("model", *AXES) if c not in table.columns]
    if missing:
        raise CliError(f"{args.csv}: missing column(s) {', '.join(missing)}")
    if table["model"].duplicated().any():
        raise CliError(f"{args.csv}: model names must be unique")
    try:
        weights = Weights.parse(args.weights or "")
        numbers = table.set_index("model")[list(AXES)].apply(pd.to_numeric, errors="raise")
        memory = _instance_memory(args.instance_memory, DEFAULT_INSTANCE_MEMORY_GIB)
        scored = compute(numbers, weights, instance_memory_gib=memory)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        records = [
            {"model": str(m), **{k: _num(v) for k, v in row.items()}}
            for m, row in scored.iterrows()
        ]
        render.emit_json(
            {
                "weights": weights.to_dict(),
                "instance_memory_gib": memory,
                "amrs": {k: _num(v) for k, v in scored.attrs["amrs"].items()},
                "models": records,
            }
        )
        return 0
    rows = [
        [int(r["rank"]), m, r["dynascore"], *[r[a] for a in AXES]] for m, r in scored.iterrows()
    ]
    print(render.table(["rank", "model", "dynascore", *AXES], rows))
    return 0


def _instance_memory(given: float | None, default: float) -> float:
    """The instance size memory is subtracted from; 0, negative or NaN is refused, not
    silently replaced by the default."""
    if given is None:
        return default
    if not math.isfinite(given) or given <= 0:
        raise ValueError(f"--instance-memory must be a number of GB > 0, not {given}")
    return given


def _num(value: Any) -> Any:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    return None if math.isnan(number) else number


# -- service ---------------------------------------------------------------------------------
def cmd_serve(args: argparse.Namespace) -> int:
    from api.app import create_app
    from client.examples import check_example_runtime, queue_examples_in_background
    from usecases.boards.cache import begin_warmup

    configure_logging(args.log_format, verbose=getattr(args, "verbose", False), service=True)
    service = open_service(args.allow_local_runtimes, args.allow_registry)
    signals = StopSignals("serve", args.grace_s, lambda: None, lambda: _hand_back_now(service))
    signals.install()  # before workers start: a signal from here on stops them cleanly
    rescored = service.rescore_stale()
    if rescored:
        print(f"re-scoring {len(rescored)} models whose task data changed", flush=True)
    examples = not args.no_examples and service.store.count_models() == 0
    # examples an earlier first start held and was stopped before releasing: released now
    left_held = {} if args.no_examples or examples else service.held_examples()
    if examples or left_held:
        check_example_runtime(args.example_runtime)  # fail fast, before anything listens
    _in_background(service.sweep_unfinished_writes, "sweep")
    service.start_workers(args.workers, grace_s=args.grace_s)
    if args.workers == 0:  # no worker here to reap a dead worker's sandboxes: serve does
        service.start_sandbox_reaper()
    begin_warmup(service)  # /ready answers 503 until every board is prepared, from the start
    app = create_app(service)
    server = _http_server(args, app)
    base = f"http://{args.host}:{server.server_port}"
    print(f"Dynaeval leaderboards: open {base}/ in a browser", flush=True)
    serve_access(app, service, args, server.server_port, base)
    print(f"Dynaeval API on {base}/api/v1 (OpenAPI: {base}/api/v1/openapi.json)", flush=True)
    for name in service.tasks:
        print(
            f"leaderboard: {base}/tasks/{name} (JSON: {base}/api/v1/tasks/{name}/leaderboard)",
            flush=True,
        )
    if examples or left_held:
        # Building the example images takes minutes on a fresh clone: the server listens
        # first and the pages show the examples as queued, then running, then scored.
        queue_examples_in_background(
            service, args.example_runtime, signals.requested, left_held or None
        )
    thread = threading.Thread(target=server.serve_forever, name="http", daemon=True)
    thread.start()
    boards_stop = threading.Event()
    boards = _keep_boards_warm(service, boards_stop, base)
    try:
        while not signals.requested.wait(1.0) and thread.is_alive():
            pass  # the main thread only waits: signal handlers run here
    finally:
        _drain(app, signals, args.drain_s)
        server.shutdown()  # no new connections; requests in progress answer first
        if args.dev_server:
            server.server_close()
        service.stop_workers(timeout=args.grace_s + 30)  # the grace, then the hand-back
        boards_stop.set()  # then every task's board, the workers' last results in it, is
        boards.join(timeout=BOARDS_KEPT_S)  # kept for the next start
        service.close()
        signals.done()
    print("dynaeval serve: stopped", flush=True)
    return 0


def _drain(app: Any, signals: StopSignals, drain_s: float) -> None:
    """Asked to stop: ``/api/v1/ready`` answers 503 ``stopping`` while requests are still
    served for ``drain_s`` (a second signal ends it), so a load balancer moves traffic away
    before the port closes."""
    if not signals.requested.is_set() or drain_s <= 0:
        return
    from api.routes import begin_stopping

    begin_stopping(app)
    print(f"dynaeval serve: draining: /ready answers 503 for {drain_s:g} s", flush=True)
    signals.again.wait(drain_s)


def _in_background(work: Callable[[], object], name: str) -> None:
    """Start ``work`` on its own daemon thread: a start does not wait for it."""
    threading.Thread(target=work, name=name, daemon=True).start()


def _keep_boards_warm(service: Any, stop: threading.Event, base: str) -> threading.Thread:
    """Every task's board prepared in the background, at start and as results land; a line
    says when every one is (``/api/v1/ready`` answers 200 from then on)."""
    from usecases.boards.cache import keep_boards_warm

    started = time.monotonic()

    def ready() -> None:
        took = time.monotonic() - started
        print(
            f"ready: every leaderboard prepared in {took:.1f} s ({base}/api/v1/ready)", flush=True
        )

    thread = threading.Thread(
        target=keep_boards_warm,
        args=(service, stop),
        kwargs={"on_ready": ready},
        name="boards",
        daemon=True,
    )
    thread.start()
    return thread


def _http_server(args: argparse.Namespace, app: Any) -> Any:
    """waitress (production), or werkzeug's development server with ``--dev-server``."""
    from api.server import WaitressServer, make_api_server

    if args.dev_server:
        return make_api_server(args.host, args.port, app)
    return WaitressServer(app, args.host, args.port, threads=args.threads)


def _hand_back_now(service: Any) -> None:
    for worker in list(service.workers):
        worker.stop(now=True)


def cmd_worker(args: argparse.Namespace) -> int:
    from worker.capabilities import detect, parse_devices
    from worker.lock import WorkerIdInUse
    from worker.outage import open_when_reachable
    from worker.worker import Worker, default_worker_id

    configure_logging(args.log_format, verbose=getattr(args, "verbose", False), service=True)
    worker_id = default_worker_id(args.name)
    try:
        devices = parse_devices(args.gpu_devices) if args.gpu_devices is not None else None
        capabilities = detect(getattr(args, "label", []), devices=devices)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    stopping = threading.Event()
    started: list[Worker] = []  # a signal may come before the worker exists

    def stop(now: bool) -> None:
        stopping.set()
        for worker in started:
            worker.stop(now=now)

    signals = StopSignals("worker", args.grace_s, lambda: stop(False), lambda: stop(True))
    signals.install()
    try:  # a worker started while the database is down waits for it instead of exiting
        service = open_when_reachable(open_service, worker_id=worker_id, stopping=stopping)
    except Exception:
        if not stopping.is_set():
            raise
        signals.done()
        print("dynaeval worker: stopped before the database answered", flush=True)
        return 0
    _in_background(service.sweep_unfinished_writes, "sweep")
    worker = Worker(
        service.store,
        service.blobs,
        service.tasks,
        worker_id=worker_id,
        grace_s=args.grace_s,
        sealer=service.sealer,  # opens the webhook secrets the API sealed
        capabilities=capabilities,
    )
    started.append(worker)
    if stopping.is_set():  # the signal came while the service was opening
        worker.stop()
    print(f"dynaeval worker: {worker.worker_id} taking jobs (SIGTERM or SIGINT stops)", flush=True)
    offered = capabilities.to_dict()
    print(
        f"dynaeval worker: offers {offered['cpus']} CPUs, {offered['memory_gib']} GiB, "
        f"{offered['gpus']} GPUs"
        + (f" ({offered['gpu_model']})" if offered["gpu_model"] else "")
        + (f" [devices {','.join(offered['gpu_devices'])}]" if offered["gpu_devices"] else "")
        + (f", labels {', '.join(offered['labels'])}" if offered["labels"] else ""),
        flush=True,
    )
    try:
        stats = worker.work(burst=args.burst)
    except WorkerIdInUse as exc:
        raise CliError(str(exc)) from None
    finally:
        service.close()
        signals.done()
    print(
        f"worker {worker.worker_id}: {stats.done} done, {stats.failed} failed, "
        f"{stats.requeued} requeued, {stats.handed_back} handed back",
        flush=True,
    )
    print("dynaeval worker: stopped", flush=True)
    return 0


def cmd_rescore(args: argparse.Namespace) -> int:
    service = open_service()
    try:
        jobs = service.rescore_stale()
    finally:
        service.close()
    print(f"queued {len(jobs)} re-evaluations")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    if args.server:
        from client.sdk import ApiClientError, DynaevalClient

        try:
            found = DynaevalClient(args.server).submission(args.model_id)
        except ApiClientError as exc:
            raise CliError(str(exc)) from None
    else:
        service = open_service()
        try:
            stored = service.queries.submission(args.model_id)
        finally:
            service.close()
        if stored is None:
            raise CliError(f"no submission {args.model_id!r}")
        found = stored
    if args.json:
        render.emit_json(found)
    else:
        job = found.get("job") or {}
        print(
            f"{found['name']} on {found['task']}: {job.get('status')} "
            f"({job.get('progress', 0) * 100:.0f}%, {job.get('stage')})"
        )
        if job.get("failure"):
            print(render.evaluation({"status": "failed", "failure": job["failure"]}))
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    if args.server:
        from client.sdk import ApiClientError, DynaevalClient

        board: Mapping[str, Any]
        try:
            board = DynaevalClient(args.server).leaderboard(
                args.task, args.weights, rounds=args.rounds
            )
        except ApiClientError as exc:
            raise CliError(str(exc)) from None
    else:
        from usecases.boards.viewing import board_for_viewer

        task = find_task(args.task)
        service = open_service()
        try:
            current = service.tasks.get(task.name) or task  # with its owner's changes
            board = board_for_viewer(service, current, args.weights, args.rounds)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        finally:
            service.close()
    if args.json:
        render.emit_json(board)
    else:
        print(render.leaderboard(board))
    return 0
