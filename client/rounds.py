"""``dynaeval rounds``: a task's rounds and held-out sets, listed or added, on the
configured database (as its operator) or through a server (as the task's owner or an
admin, with the stored token). A file is checked row by row before anything is stored."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from client.common import CliError, Subparsers, open_service

if TYPE_CHECKING:
    from client.sdk import DynaevalClient


def add_rounds_parser(sub: Subparsers) -> None:
    """``rounds add`` and ``rounds list``."""
    rounds = sub.add_parser(
        "rounds",
        help="list a task's rounds, or add a round or dataset from a JSONL file (on the "
        "configured database, or with --server as the task's owner or an admin)",
    )
    actions = rounds.add_subparsers(dest="rounds_command", required=True, metavar="ACTION")
    add = actions.add_parser(
        "add",
        help="add ROUND with DATA.jsonl as its dataset, or add or replace a dataset of an "
        "existing round; the same content again changes nothing, new content is a new version",
    )
    add.add_argument("task")
    add.add_argument("round")
    add.add_argument("data", metavar="DATA.jsonl", help="one example a line, the task's fields")
    add.add_argument("--weight", type=_weight, help="the round's weight (> 0; new rounds: 1)")
    add.add_argument("--dataset", default="test", help="the dataset's name (default: test)")
    listing = actions.add_parser("list", help="rounds, weights and datasets (hash, size, version)")
    listing.add_argument("task")
    for parser in (add, listing):
        parser.add_argument("--server", help="API base URL (with your token)")
        parser.add_argument("--json", action="store_true", help="print JSON")
    rounds.set_defaults(handler=cmd_rounds)


def cmd_rounds(args: argparse.Namespace) -> int:
    """Run ``rounds add`` or ``rounds list``; bad input is a CliError (exit 2)."""
    if args.rounds_command == "list":
        listed = _remote_list(args) if args.server else _local_list(args.task)
        _print_rounds(listed, args.json)
        return 0
    path = Path(args.data)
    if not path.is_file():
        raise CliError(f"no such file {args.data!r}")
    change = _remote_add(args, path) if args.server else _local_add(args, path)
    _print_change(change, args.json)
    return 0


def _weight(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number > 0, not {text!r}")
    return value


# -- on the configured database --------------------------------------------------------------
def _local_list(task_name: str) -> dict[str, Any]:
    from usecases.rounds import rounds_of

    service = open_service()
    try:
        task = _task(service, task_name)
        return {"task": task.name, "task_version": task.version, "rounds": rounds_of(service, task)}
    finally:
        service.close()


def _local_add(args: argparse.Namespace, path: Path) -> dict[str, Any]:
    from usecases.rounds import RoundRefused, Upload, add_dataset, set_weight

    service = open_service()
    try:
        task = _task(service, args.task)
        exists = any(r.name == args.round for r in task.rounds)
        with path.open("rb") as stream:
            upload = Upload(args.round, args.dataset, stream, path.name, args.weight, not exists)
            change = add_dataset(service, task, upload)
        if exists and args.weight is not None:
            weighted = set_weight(service, _task(service, args.task), args.round, args.weight)
            change = dataclasses.replace(change, round=weighted.round)
        return change.to_dict()
    except RoundRefused as exc:
        raise CliError(exc.message) from None
    finally:
        service.close()


def _task(service: Any, name: str) -> Any:
    task = service.tasks.get(name)
    if task is None:
        raise CliError(f"unknown task {name!r} (tasks: {', '.join(sorted(service.tasks))})")
    return task


# -- through a server ------------------------------------------------------------------------
def _client(server: str) -> DynaevalClient:
    from client.sdk import DynaevalClient

    return DynaevalClient(server)


def _remote_list(args: argparse.Namespace) -> dict[str, Any]:
    from client.sdk import ApiClientError

    try:
        return _client(args.server).rounds(args.task)
    except (ApiClientError, OSError) as exc:
        raise CliError(str(exc)) from None


def _remote_add(args: argparse.Namespace, path: Path) -> dict[str, Any]:
    from client.sdk import ApiClientError

    try:
        return _client(args.server).add_round(
            args.task, args.round, path, dataset=args.dataset, weight=args.weight
        )
    except (ApiClientError, OSError) as exc:
        raise CliError(str(exc)) from None


# -- output ----------------------------------------------------------------------------------
def _print_rounds(listed: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(listed, indent=2))
        return
    from client import render

    rows = [
        [r["name"], r["weight"], d["name"], d["version"], d["examples"], d["sha256"][:12],
         d["source"]]
        for r in listed["rounds"]
        for d in r["datasets"]
    ]  # fmt: skip
    print(f"{listed['task']} (version {listed['task_version']})")
    print(
        render.table(["round", "weight", "dataset", "version", "examples", "sha256", "from"], rows)
    )


def _print_change(change: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(change, indent=2))
        return
    dataset = change.get("dataset") or {}
    what = "added" if change["created"] else "unchanged (the same content is there)"
    print(
        f"{change['task']}: round {change['round']['name']} (weight {change['round']['weight']}) "
        f"dataset {dataset.get('name')} version {dataset.get('version')}, "
        f"{dataset.get('examples')} examples, sha256 {str(dataset.get('sha256'))[:12]}: {what}; "
        f"task version {change['task_version']}"
    )
