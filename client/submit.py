"""``dynaeval submit``: to a server or the local database, with a wait and a release gate."""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from client import render
from client.common import CliError, find_task, open_service
from client.sdk import WaitTimeout
from configs.schema import TaskSpec

if TYPE_CHECKING:
    from store.blobs import BlobStore


LOCAL_POLL_S = 1.0
REMOTE_POLL_S = 2.0


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
        spec, image_id = _local_spec(args, task, service.blobs)
        try:
            model_id, _ = service.store.submit(task.name, args.name, spec, image_id=image_id)
        except Exception:
            if spec.get("blob"):  # nothing half-stored
                service.blobs.delete(spec["blob"])
            raise

        def fetch() -> dict[str, Any]:
            return service.queries.submission(model_id) or {"id": model_id}

        return wait_until_final(fetch, args.timeout, LOCAL_POLL_S) if _waits(args) else fetch()
    finally:
        service.close()


def _local_spec(
    args: argparse.Namespace, task: TaskSpec, blobs: BlobStore
) -> tuple[dict[str, Any], str | None]:
    """The runtime spec of a local submission and its image ID when a tarball pins it."""
    path = Path(args.model)
    base = {"kind": "docker", "protocol": args.protocol}
    if path.is_file():
        image_id = _inspect(path, task)
        key = f"uploads/{uuid.uuid4()}.tar"  # never the file name: any name is a valid file
        with path.open("rb") as handle:
            blobs.put_file(key, handle)
        return {**base, "source": "upload", "blob": key, "image": path.name}, image_id
    if path.exists():
        raise CliError(f"{args.model} is not a file: give a `docker save` tarball")
    from evaluator.runtimes.factory import check_registry_reference

    try:
        reference = check_registry_reference(args.model)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return {**base, "source": "registry", "image": reference}, None


def _inspect(path: Path, task: TaskSpec) -> str:
    """The image ID of a `docker save` tarball; Refused when it is corrupt, holds several
    images or is over the task's limit."""
    from evaluator.errors import EvaluationError
    from evaluator.runtimes.docker.images import inspect_tarball

    try:
        image_id, _ = inspect_tarball(path, task.limits)
    except EvaluationError as exc:
        raise Refused(exc.code.value, exc.message) from None
    return image_id


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
        if exc.code in ("image_not_loadable", "image_too_large"):
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
