"""``dynaeval submit``: to a server or the local database, with a wait and a release gate."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from client import render
from client.common import CliError, find_task, open_service
from client.sdk import WaitTimeout
from configs.schema import TaskSpec

if TYPE_CHECKING:
    from api.service import Service


LOCAL_POLL_S = 1.0
REMOTE_POLL_S = 2.0
IMAGE_REFUSALS = ("image_not_loadable", "image_too_large")


class Refused(Exception):
    """The model was refused before anything was stored (exit 1, code and sentence)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit to ``--server`` or the local database; with ``--wait``/``--fail-under`` gate on
    the finished job (exit 1 when it failed, scored under X, or did not finish in time)."""
    task = find_task(args.task)
    _check_name(args.name)
    try:
        found = _submit_remote(args) if args.server else _submit_local(args, task)
    except Refused as exc:
        return _show_refusal(args, exc)
    except WaitTimeout as exc:
        _show_submission(args, exc.submission)
        print(_timeout_message(args, exc), file=sys.stderr)
        return 1
    _show_submission(args, found)
    return _gate(args, found)


def _waits(args: argparse.Namespace) -> bool:
    return bool(args.wait or args.fail_under is not None)


def _check_name(name: str) -> None:
    from marshmallow import ValidationError

    from api.schemas import NAME

    try:
        NAME(name)
    except ValidationError:
        raise CliError(f"--name {name!r}: {NAME.error}") from None


def _submit_local(args: argparse.Namespace, task: TaskSpec) -> dict[str, Any]:
    from client.sdk import wait_until_final

    service = open_service()
    try:
        model_id = _queue_local(args, task, service)

        def fetch() -> dict[str, Any]:
            return service.queries.submission(model_id) or {"id": model_id}

        return wait_until_final(fetch, args.timeout, LOCAL_POLL_S) if _waits(args) else fetch()
    finally:
        service.close()


def _queue_local(args: argparse.Namespace, task: TaskSpec, service: Service) -> str:
    """Submit a tarball file or a registry reference to the local database; its model id."""
    from api.submissions import SubmissionRefused, submit_file, submit_reference

    path = Path(args.model)
    if path.exists() and not path.is_file():
        raise CliError(f"{args.model} is not a file: give a `docker save` tarball")
    try:
        if path.is_file():
            submitted = submit_file(service, task, args.name, path, args.protocol)
        else:
            submitted = submit_reference(service, task, args.name, args.model, args.protocol)
    except SubmissionRefused as exc:
        raise _refusal(exc.code, exc.message) from None
    return submitted.model_id


def _refusal(code: str, message: str) -> Refused | CliError:
    """A broken or oversized image is a refusal (exit 1); any other problem a usage error."""
    if code in IMAGE_REFUSALS:
        return Refused(code, message)
    return CliError(message)


def _submit_remote(args: argparse.Namespace) -> dict[str, Any]:
    import requests

    from client.sdk import ApiClientError, DynaevalClient

    client = DynaevalClient(args.server)
    try:
        if Path(args.model).is_file():
            created = client.submit_image(args.task, args.name, args.model, args.protocol)
        else:
            runtime = {"kind": "docker", "image": args.model, "protocol": args.protocol}
            created = client.submit(args.task, args.name, runtime)
        if _waits(args):
            return client.wait(created["id"], timeout=args.timeout, poll=REMOTE_POLL_S)
        return client.submission(created["id"])
    except ApiClientError as exc:
        if exc.code in IMAGE_REFUSALS:
            raise Refused(exc.code, exc.message) from None
        raise CliError(str(exc)) from None
    except requests.RequestException as exc:
        raise CliError(f"cannot reach {args.server}: {exc}") from None


def _show_refusal(args: argparse.Namespace, exc: Refused) -> int:
    if args.json:
        render.emit_json(
            {"status": "refused", "failure": {"code": exc.code, "message": exc.message}}
        )
    print(f"dynaeval submit: {exc.code}: {exc.message} (nothing was stored)", file=sys.stderr)
    return 1


def _show_submission(args: argparse.Namespace, found: dict[str, Any]) -> None:
    """The submission as JSON (its job status also on top, for CI) or one line of text."""
    from client.sdk import job_status

    if args.json:
        render.emit_json({**found, "status": job_status(found)})
        return
    print(render.submission(found))


def _gate(args: argparse.Namespace, found: dict[str, Any]) -> int:
    """Exit 1 when the job failed or scored under ``--fail-under``."""
    job = found.get("job") or {}
    if job.get("status") == "failed":
        failure = job.get("failure") or {}
        print(
            f"submission {found['id']} failed: {failure.get('code')}: {failure.get('message')}",
            file=sys.stderr,
        )
        return 1
    if args.fail_under is None:
        return 0
    performance = (found.get("results") or {}).get("performance")
    if performance is None or performance < args.fail_under:
        shown = "missing" if performance is None else f"{performance:.2f}"
        print(f"performance {shown} is under {args.fail_under}", file=sys.stderr)
        return 1
    return 0


def _timeout_message(args: argparse.Namespace, exc: WaitTimeout) -> str:
    job = exc.submission.get("job") or {}
    where = (
        f"on {args.server}"
        if args.server
        else "in the local database: is a `dynaeval worker` running on it?"
    )
    return (
        f"dynaeval submit: gave up after {exc.timeout:g} s: submission "
        f"{exc.submission.get('id')} is still {job.get('status')} ({job.get('stage')}) {where}"
    )
