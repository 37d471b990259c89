"""The ``dynaeval`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from client import commands
from evaluator.transport.dialects import DEFAULT_DIALECT, dialect_choices


def build_parser() -> argparse.ArgumentParser:
    """The ``dynaeval`` parser: one small function below per sub-command."""
    parser = argparse.ArgumentParser(
        prog="dynaeval",
        description="Evaluate model containers on every round of a task, with perturbations, "
        "fairness slices and profiling; rank them by Dynascore.",
        epilog="Environment: DYNAEVAL_DATA_DIR (default ./dynaeval-data: SQLite file, blobs, "
        "cached perturbed sets), DYNAEVAL_DATABASE_URL (a SQLAlchemy URL instead of the SQLite "
        "file). Exit codes: 0 ok, 1 the evaluation failed or a gate was missed, 2 bad usage.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        _serve,
        _worker,
        _tasks,
        _evaluate,
        _submit,
        _leaderboard,
        _dynascore,
        _rescore,
        _status,
    ):
        add(sub)
    return parser


Subparsers = argparse._SubParsersAction  # argparse has no public name for it


def _serve(sub: Subparsers) -> None:
    serve = sub.add_parser(
        "serve", help="run the API and an embedded worker (SQLite + local folder)"
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1, help="embedded worker threads")
    serve.add_argument(
        "--no-examples",
        action="store_true",
        help="do not queue the example models on an empty database",
    )
    serve.add_argument(
        "--example-runtime",
        choices=["auto", "docker", "process"],
        default="auto",
        help="how example models run (auto: docker when an engine answers)",
    )
    serve.add_argument(
        "--allow-local-runtimes",
        action="store_true",
        help="accept process/url submissions over the API (trusted setups only)",
    )


def _worker(sub: Subparsers) -> None:
    worker = sub.add_parser("worker", help="run a worker against the configured database")
    worker.add_argument("--burst", action="store_true", help="drain the queue, then exit")
    worker.add_argument(
        "--name",
        default="worker",
        help="unique per concurrent worker on this host; a restarted worker "
        "with the same name removes its predecessor's leftover containers",
    )


def _tasks(sub: Subparsers) -> None:
    tasks = sub.add_parser("tasks", help="list the tasks")
    tasks.add_argument("--json", action="store_true")


def _evaluate(sub: Subparsers) -> None:
    evaluate = sub.add_parser("evaluate", help="evaluate one model locally (no server needed)")
    evaluate.add_argument(
        "model",
        help="process: a command or a model.py; url: http://host:port; "
        "docker: an image tarball, a directory with a Dockerfile, or a reference",
    )
    evaluate.add_argument("--task", required=True, help="a task name (see `dynaeval tasks`)")
    evaluate.add_argument(
        "--runtime",
        choices=["docker", "process", "url"],
        default=None,
        help="default: process for a .py file or command, url for http://, else docker",
    )
    evaluate.add_argument("--protocol", choices=dialect_choices(), default=DEFAULT_DIALECT)
    evaluate.add_argument(
        "--save-predictions",
        type=Path,
        metavar="DIR",
        help="write every prediction (original and perturbed) as JSONL",
    )
    evaluate.add_argument("--json", action="store_true", help="print one JSON object")
    evaluate.add_argument(
        "--fail-under", type=float, metavar="X", help="exit 1 when performance is below X"
    )


def _submit(sub: Subparsers) -> None:
    submit = sub.add_parser("submit", help="submit a model (to --server, or the local database)")
    submit.add_argument(
        "model", help="a `docker save` tarball, or an image reference in a registry"
    )
    submit.add_argument("--task", required=True, help="a task name (see `dynaeval tasks`)")
    submit.add_argument("--name", required=True)
    submit.add_argument("--protocol", choices=dialect_choices(), default=DEFAULT_DIALECT)
    submit.add_argument("--server", help="API base URL, e.g. http://127.0.0.1:8000")
    submit.add_argument(
        "--wait",
        action="store_true",
        help="wait until the job is done or failed (locally, a `dynaeval worker` must run)",
    )
    submit.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=3600.0,
        metavar="SECONDS",
        help="give up waiting after this long and exit 1 (default 3600)",
    )
    submit.add_argument(
        "--fail-under",
        type=float,
        metavar="X",
        help="implies --wait; exit 1 when the job failed or its performance is below X",
    )
    submit.add_argument(
        "--json", action="store_true", help="print the submission (with results) as JSON"
    )


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, not {text!r}")
    return value


def _leaderboard(sub: Subparsers) -> None:
    board = sub.add_parser("leaderboard", help="a task's leaderboard")
    board.add_argument("task")
    board.add_argument("--weights", help="e.g. performance:4,throughput:1,memory:0")
    board.add_argument("--server", help="API base URL (default: the local database)")
    board.add_argument("--json", action="store_true")


def _dynascore(sub: Subparsers) -> None:
    score = sub.add_parser("dynascore", help="Dynascore of a CSV table of model metrics")
    score.add_argument(
        "csv",
        type=Path,
        help="columns: model, performance, throughput, memory, robustness, fairness",
    )
    score.add_argument("--weights", help="e.g. performance:4,memory:0 (others keep defaults)")
    score.add_argument(
        "--instance-memory",
        type=float,
        metavar="GB",
        default=None,
        help="memory utility = GB - memory (default 32, Dynaboard's instance)",
    )
    score.add_argument("--json", action="store_true")


def _rescore(sub: Subparsers) -> None:
    sub.add_parser(
        "rescore",
        help="queue a new evaluation of every model scored on data its task no longer has "
        "(run after adding a round; serve does it on start)",
    )


def _status(sub: Subparsers) -> None:
    status = sub.add_parser("status", help="a submission's status and results")
    status.add_argument("model_id")
    status.add_argument("--server")
    status.add_argument("--json", action="store_true")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if not args.verbose:  # one line per HTTP request only when asked for
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
    handler = getattr(commands, f"cmd_{args.command}")
    try:
        return handler(args)
    except commands.CliError as exc:
        print(f"dynaeval {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `dynaeval … | head`: the reader left; exit quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
