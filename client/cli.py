"""The ``dynaeval`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from client.common import CliError, Subparsers
from client.images import add_images_parser
from client.rerun import cmd_rerun
from client.rounds import add_rounds_parser
from client.task_creation import add_create_parser
from configs.schema import ConfigError
from configs.vocabulary.scopes import MAX_TOKEN_DAYS, SCOPES
from evaluator.transport.dialects import DEFAULT_DIALECT, dialect_choices


def build_parser() -> argparse.ArgumentParser:
    """The ``dynaeval`` parser: one small function below per sub-command."""
    parser = argparse.ArgumentParser(
        prog="dynaeval",
        description="Evaluate model containers on every round of a task, with perturbations, "
        "fairness slices and profiling; rank them by Dynascore.",
        epilog="Environment: DYNAEVAL_DATA_DIR (default ./dynaeval-data: SQLite file, blobs, "
        "cached perturbed sets), DYNAEVAL_DATABASE_URL (a SQLAlchemy URL instead of the SQLite "
        "file), DYNAEVAL_STORE_URL (a folder or s3://bucket/prefix for blobs), DYNAEVAL_CONFIG "
        "(a TOML settings file; `dynaeval config` shows the effective settings). Exit codes: 0 ok, 1 the evaluation failed or a gate was missed, 2 bad usage "
        "(submit has its own gate contract: see `dynaeval submit --help`).",
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
        _rerun,
        add_rounds_parser,
        add_images_parser,
        _users,
        _tokens,
        _login,
        _config,
    ):
        add(sub)
    return parser


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
        help="accept process/url submissions over the API from admins (trusted setups only)",
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="answer requests for this Host too (default: 127.0.0.1, localhost, [::1] on the "
        "serve port; others get 421 against DNS rebinding); repeatable, added to "
        "DYNAEVAL_ALLOWED_HOSTS (comma-separated)",
    )
    serve.add_argument(
        "--allow-registry",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="let submissions name this registry although it is on a local network "
        "(loopback, private, link-local, *.local...); repeatable, added to "
        "DYNAEVAL_ALLOWED_REGISTRIES (comma-separated)",
    )
    serve.add_argument(
        "--threads",
        type=_positive_int,
        default=8,
        help="threads answering requests (default 8); idle and slow connections take none",
    )
    serve.add_argument(
        "--dev-server",
        action="store_true",
        help="werkzeug's development server instead of waitress (comparisons only)",
    )
    serve.add_argument(
        "--drain-s",
        type=_non_negative_seconds,
        default=0.0,
        metavar="SECONDS",
        help="on SIGTERM or SIGINT, answer /api/v1/ready with 503 stopping and go on serving "
        "for this long before closing, so a load balancer moves traffic away first "
        "(default 0; a second signal ends it)",
    )
    _stopping_options(serve)


def _stopping_options(parser: argparse.ArgumentParser) -> None:
    """``--grace-s`` and ``--log-format``, the same for serve and worker."""
    parser.add_argument(
        "--grace-s",
        type=_non_negative_seconds,
        default=30.0,
        metavar="SECONDS",
        help="on SIGTERM or SIGINT, how long the running job may go on before it is handed "
        "back to the queue (default 30); a second signal hands it back at once",
    )
    parser.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="json: one JSON object per line (time, level, logger, message, job_id...)",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, not {text!r}")
    return value


def _non_negative_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, not {text!r}")
    return value


def _worker(sub: Subparsers) -> None:
    worker = sub.add_parser("worker", help="run a worker against the configured database")
    worker.add_argument("--burst", action="store_true", help="drain the queue, then exit")
    worker.add_argument(
        "--name",
        default="worker",
        help="unique per concurrent worker on this host; a restarted worker "
        "with the same name removes its predecessor's leftover containers",
    )
    worker.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="LABEL",
        help="a label this worker offers (repeatable; 1-63 of a-z 0-9 . _ -): it also "
        "claims submissions whose requirements name it; CPUs, memory and GPUs (through "
        "NVML) are detected",
    )
    worker.add_argument(
        "--gpu-devices",
        metavar="IDS",
        help="the GPUs that are this worker's alone, by index or GPU-... UUID (e.g. 0,1): "
        "give each worker on a machine its own, so two jobs never share a GPU (default: "
        "every GPU NVML finds)",
    )
    _stopping_options(worker)


def _tasks(sub: Subparsers) -> None:
    tasks = sub.add_parser("tasks", help="list the tasks (from the files), or create one")
    tasks.add_argument("--json", action="store_true")
    actions = tasks.add_subparsers(dest="tasks_command", metavar="ACTION")
    add_create_parser(actions)


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
    evaluate.add_argument(
        "--json", action="store_true", help="print one JSON object (no progress bar)"
    )
    evaluate.add_argument(
        "--fail-under", type=float, metavar="X", help="exit 1 when performance is below X"
    )


def _idempotency_key(text: str) -> str:
    from configs.vocabulary.idempotency import IDEMPOTENCY_KEY

    if not IDEMPOTENCY_KEY.match(text):
        raise argparse.ArgumentTypeError("1-128 of A-Z a-z 0-9 . _ : -")
    return text


def _requirement(text: str) -> tuple[str, Any]:
    """``--require KEY=VALUE`` as the API's requirements object takes it."""
    key, sep, value = text.partition("=")
    if not sep or not value:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    if key in ("gpus", "cpus"):
        if not (value.isascii() and value.isdigit()):
            raise argparse.ArgumentTypeError(f"{key} takes a whole number, not {value!r}")
        return key, int(value)
    if key == "memory_gib":
        if not re.fullmatch(r"[0-9]+(\.[0-9]+)?", value):
            raise argparse.ArgumentTypeError(f"{key} takes a number like 8 or 0.5, not {value!r}")
        return key, float(value)
    if key == "labels":
        labels = value.split(",")
        if "" in labels:  # "labels=," asked for nothing and was submitted as no requirement
            raise argparse.ArgumentTypeError(f"labels are names separated by commas, not {value!r}")
        return key, labels
    if key == "gpu_model":
        return key, value
    raise argparse.ArgumentTypeError(
        f"unknown requirement {key!r} (gpus, cpus, memory_gib, gpu_model, labels)"
    )


def _submit(sub: Subparsers) -> None:
    from client.credentials import API_KEY_ENV
    from client.gate import EXIT_USAGE, parse_thresholds

    submit = sub.add_parser(
        "submit",
        help="submit a model (to --server, or the local database)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Exit codes: 0 submitted (and every gate passed), 1 below a --fail-under "
        "threshold or a significant drop against --compare-to, 2 the evaluation failed or did "
        "not finish within --timeout (or the tarball was refused), 3 bad usage or the server "
        f"could not be reached or refused the request.\nWith --server, the API token is "
        f"${API_KEY_ENV}, else the one `dynaeval login` stored for that server.",
    )
    _usage_errors_exit(submit, EXIT_USAGE)
    submit.add_argument(
        "model", help="a `docker save` tarball, or an image reference in a registry"
    )
    submit.add_argument("--task", required=True, help="a task name (see `dynaeval tasks`)")
    submit.add_argument("--name", required=True)
    submit.add_argument("--protocol", choices=dialect_choices(), default=DEFAULT_DIALECT)
    submit.add_argument("--server", help="API base URL, e.g. http://127.0.0.1:8000")
    submit.add_argument(
        "--publish",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="publish the results once scored, so anyone who may see the task opens the "
        "model's page (default: the task's publish_results)",
    )
    submit.add_argument(
        "--require",
        type=_requirement,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="what the worker must have (repeatable): gpus=N, cpus=N, memory_gib=X, "
        "gpu_model=TEXT, labels=A,B; only a worker that meets them runs the model",
    )
    submit.add_argument(
        "--idempotency-key",
        type=_idempotency_key,
        metavar="KEY",
        help="with --server: the same KEY from the same user makes one submission however "
        "often it is sent (a CI job can pass its commit and run id); default: a new one, "
        "reused for this command's own retries after a timeout",
    )
    submit.add_argument(
        "--upload-id",
        metavar="ID",
        help="with --server: finish the resumable upload ID that an interrupted submit "
        "named, sending only the parts the server lacks (tarballs of 64 MiB or more go in "
        "parts, with a progress bar on a terminal)",
    )
    submit.add_argument(
        "--wait",
        action="store_true",
        help="wait until the job is done or failed (locally, a `dynaeval worker` must run); "
        "a progress bar is drawn on a terminal",
    )
    submit.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=3600.0,
        metavar="SECONDS",
        help="give up waiting after this long and exit 2 (default 3600)",
    )
    submit.add_argument(
        "--fail-under",
        type=parse_thresholds,
        action="append",
        metavar="[METRIC=]X",
        help="implies --wait; exit 1 when METRIC is below X: performance, robustness, "
        "fairness, throughput, dynascore (the board's 0-100 score under its default "
        "weights) or rank (exit 1 when ranked worse than X), e.g. performance=80 or "
        "rank=3; a bare number is performance; repeat or separate with commas",
    )
    submit.add_argument(
        "--compare-to",
        metavar="MODEL_ID",
        help="implies --wait; paired bootstrap against an earlier submission on the same "
        "examples: print the difference with its 95%% interval, exit 1 only on a drop "
        "significant at 95%%",
    )
    submit.add_argument(
        "--json",
        action="store_true",
        help="print the submission (with results and the gate's checks) as JSON; no progress bar",
    )


def _usage_errors_exit(parser: argparse.ArgumentParser, code: int) -> None:
    """Make this sub-command's argument errors exit ``code`` instead of argparse's 2."""

    def error(message: str) -> NoReturn:
        parser.print_usage(sys.stderr)
        parser.exit(code, f"{parser.prog}: error: {message}\n")

    setattr(parser, "error", error)  # noqa: B010 - argparse has no hook for the exit code


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, not {text!r}")
    return value


def _token_days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= MAX_TOKEN_DAYS:
        raise argparse.ArgumentTypeError(
            f"must be a number of days > 0 and <= {MAX_TOKEN_DAYS:g}, not {text!r}"
        )
    return value


def _leaderboard(sub: Subparsers) -> None:
    board = sub.add_parser("leaderboard", help="a task's leaderboard")
    board.add_argument("task")
    board.add_argument("--weights", help="e.g. performance:4,throughput:1,memory:0")
    board.add_argument("--rounds", help="round weights, e.g. r1:1,r2:0.5 (others keep theirs)")
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


def _rerun(sub: Subparsers) -> None:
    rerun = sub.add_parser(
        "rerun",
        help="evaluate a submission again (its submitter within their quota, its task's owner, "
        "an admin): a failed job is retried with a fresh budget of attempts, a finished one "
        "gets a new job",
    )
    rerun.add_argument("model_id")
    rerun.add_argument(
        "--server",
        help="through this API (with your token); without it, on the configured database",
    )
    rerun.set_defaults(handler=cmd_rerun)


def _users(sub: Subparsers) -> None:
    users = sub.add_parser("users", help="add or list users (on the configured database)")
    actions = users.add_subparsers(dest="users_command", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="add a user (asks for a password at a terminal)")
    add.add_argument("name")
    role = add.add_mutually_exclusive_group()
    role.add_argument("--admin", action="store_true", help="an admin (tasks, users, everything)")
    role.add_argument(
        "--role",
        choices=["admin", "author", "researcher"],
        default="researcher",
        help="an author is a researcher who may also create tasks (default: researcher)",
    )
    password = add.add_mutually_exclusive_group()
    password.add_argument(
        "--password-stdin", action="store_true", help="read the password from stdin"
    )
    password.add_argument(
        "--no-password", action="store_true", help="no page login: API tokens only"
    )
    set_role = actions.add_parser(
        "set-role",
        help="change a user's role (a demotion takes effect at their next request)",
    )
    set_role.add_argument("name")
    set_role.add_argument(
        "role",
        choices=["admin", "author", "researcher"],
        help="an author may also create tasks; the last admin cannot be demoted",
    )
    listing = actions.add_parser("list", help="every user")
    listing.add_argument("--json", action="store_true")


def _tokens(sub: Subparsers) -> None:
    tokens = sub.add_parser(
        "tokens",
        help="create, list, revoke or rotate API tokens (yours with --server, or --user's "
        "on the configured database)",
    )
    actions = tokens.add_subparsers(dest="tokens_command", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="a new token; its secret is printed once")
    create.add_argument("name", help="what the token is for, e.g. ci")
    create.add_argument(
        "--scope",
        action="append",
        choices=SCOPES,
        help="repeatable (default: read and submit; 'tokens' lets the token manage your tokens)",
    )
    create.add_argument("--expires-in-days", type=_token_days, metavar="DAYS")
    actions.add_parser("list", help="your tokens, never their secrets")
    for action in ("revoke", "rotate"):
        actions.add_parser(action, help=f"{action} a token by id").add_argument("id")
    for parser in actions.choices.values():
        parser.add_argument("--server", help="API base URL (your own tokens, via the API)")
        parser.add_argument("--user", help="without --server: this user on the local database")
        parser.add_argument("--json", action="store_true")


def _login(sub: Subparsers) -> None:
    login = sub.add_parser(
        "login",
        help="store a token for a server in ~/.config/dynaeval/credentials.json (0600)",
    )
    login.add_argument("--server", required=True, help="API base URL")
    login.add_argument("--user", help="log in with this user's password and make a token")
    login.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    login.add_argument("--token-stdin", action="store_true", help="read a token from stdin")
    login.add_argument("--token-name", default="cli", help="the new token's name")


def _config(sub: Subparsers) -> None:
    from client import config_cmd

    config = sub.add_parser(
        "config", help="show the effective settings and where each came from (secrets masked)"
    )
    config_cmd.add_arguments(config)
    config.set_defaults(handler=config_cmd.cmd_config)


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format=LOG_FORMAT)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if not args.verbose:  # one line per HTTP request only when asked for
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
    # the commands (and the HTTP client, progress bars, accounts they bring) load once a
    # command runs: `--help` and a usage error never need them
    from client import commands

    handler = getattr(args, "handler", None) or getattr(commands, f"cmd_{args.command}")
    try:
        code: int = handler(args)
        return code
    except (CliError, ConfigError) as exc:  # a bad setting is a usage error too
        print(f"dynaeval {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `dynaeval … | head`: the reader left; exit quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
