"""``dynaeval tasks create SPEC.yaml --data ROUND[/DATASET]=FILE ...``: a new task from a spec
and its datasets, on the configured database (as its operator) or through a server (as an
admin or an author, with the stored token). Everything is checked before anything is
stored; a bad spec names the field, a bad row names the file and line."""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import Any

from client.common import CliError, Subparsers, open_service


def add_create_parser(actions: Subparsers) -> None:
    """``tasks create``."""
    create = actions.add_parser(
        "create",
        help="create a task from SPEC (YAML or JSON) and one JSONL file per dataset",
    )
    create.add_argument("spec", metavar="SPEC.yaml", help="the task's keys; datasets have no path")
    create.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="ROUND[/DATASET]=FILE",
        help="a dataset's JSONL file (dataset 'test' unless named); once per dataset",
    )
    create.add_argument("--server", help="API base URL (with your token)")
    create.add_argument("--json", action="store_true", help="print JSON")
    create.set_defaults(handler=cmd_tasks_create)


def cmd_tasks_create(args: argparse.Namespace) -> int:
    """Create the task; bad input is a CliError (exit 2)."""
    spec_path = Path(args.spec)
    if not spec_path.is_file():
        raise CliError(f"no such file {args.spec!r}")
    files = [_data_argument(text) for text in args.data]
    created = _remote(args.server, spec_path, files) if args.server else _local(spec_path, files)
    if args.json:
        print(json.dumps(created, indent=2))
    else:
        rounds = ", ".join(f"{r['name']} ({len(r['datasets'])})" for r in created["rounds"])
        print(f"created task {created['name']} version {created['version']}: rounds {rounds}")
    return 0


def _data_argument(text: str) -> tuple[str, str, Path]:
    target, sep, file = text.partition("=")
    round_name, _, dataset = target.partition("/")
    if not sep or not round_name or not file:
        raise CliError(f"--data {text!r}: write ROUND=FILE or ROUND/DATASET=FILE")
    path = Path(file)
    if not path.is_file():
        raise CliError(f"--data {text!r}: no such file {file!r}")
    return round_name, dataset or "test", path


def _local(spec_path: Path, files: list[tuple[str, str, Path]]) -> dict[str, Any]:
    from usecases.tasks import DatasetFile, TaskRefused, create_task

    service = open_service()
    try:
        with contextlib.ExitStack() as stack:
            uploads = [
                DatasetFile(r, d, stack.enter_context(p.open("rb")), p.name) for r, d, p in files
            ]
            return create_task(service, spec_path.read_text(encoding="utf-8"), uploads, None)
    except TaskRefused as exc:
        raise CliError(exc.message) from None
    finally:
        service.close()


def _remote(server: str, spec_path: Path, files: list[tuple[str, str, Path]]) -> dict[str, Any]:
    from client.sdk import ApiClientError, DynaevalClient

    try:
        data = {(f"{r}/{d}" if d != "test" else r): p for r, d, p in files}
        return DynaevalClient(server).create_task(spec_path, data)
    except (ApiClientError, OSError) as exc:
        raise CliError(str(exc)) from None
