"""``dynaeval submit``: to a server or the local database, with a wait and a release gate.

Exit codes (the gate's contract, for CI):

* 0 — submitted; with a gate, every threshold met and no significant drop;
* 1 — the model scored below a ``--fail-under`` threshold, or ``--compare-to`` found a drop
  significant at 95 % (paired bootstrap over the same examples);
* 2 — the evaluation failed (the job failed, the tarball was refused) or did not finish
  within ``--timeout``: no verdict on the model;
* 3 — bad usage, or the server could not be reached or refused the request.
"""

from __future__ import annotations

import argparse
import math
import sys
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from client import render
from client.common import CliError, find_task, open_service
from client.gate import (
    BOARD_METRICS,
    EXIT_BELOW,
    EXIT_FAILED,
    EXIT_PASS,
    EXIT_USAGE,
    Threshold,
)
from client.progress import ProgressBar, progress_wanted
from client.sdk import WaitTimeout, job_status, wait_until_final
from configs.schema import TaskSpec

if TYPE_CHECKING:
    from client.sdk import DynabenchClient
    from usecases.service import Service


LOCAL_POLL_S = 1.0
REMOTE_POLL_S = 2.0
IMAGE_REFUSALS = ("image_not_loadable", "image_too_large")


class Refused(Exception):
    """The model was refused before anything was stored (exit 2, code and sentence)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit to ``--server`` or the local database; with ``--wait``, ``--fail-under`` or
    ``--compare-to`` gate on the finished job (exit codes: see the module docstring)."""
    try:
        return _submit(args)
    except CliError as exc:
        print(f"dynaeval submit: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _submit(args: argparse.Namespace) -> int:
    task = find_task(args.task)
    _check_name(args.name)
    thresholds = [t for group in args.fail_under or [] for t in group]
    if getattr(args, "upload_id", None) and not args.server:
        raise CliError("--upload-id resumes an upload to a server: give --server too")
    backend: Backend = Remote(args) if args.server else Local(task)
    try:
        if args.compare_to:
            backend.check_baseline(args.compare_to, task.name)
        try:
            model_id = backend.submit(args)
        except Refused as exc:
            return _show_refusal(args, exc)
        if not _waits(args, thresholds):
            _show_submission(args, backend.fetch(model_id))
            return EXIT_PASS
        try:
            found = _wait(args, backend, model_id)
        except WaitTimeout as exc:
            _show_submission(args, exc.submission)
            print(_timeout_message(args, exc), file=sys.stderr)
            return EXIT_FAILED
        return _verdict(args, backend, found, thresholds)
    finally:
        backend.close()


def _waits(args: argparse.Namespace, thresholds: list[Threshold]) -> bool:
    return bool(args.wait or thresholds or args.compare_to)


def _check_name(name: str) -> None:
    from configs.vocabulary.names import MODEL_NAME_RULE, is_model_name

    if not is_model_name(name):
        raise CliError(f"--name {name!r}: {MODEL_NAME_RULE}")


def _wait(args: argparse.Namespace, backend: Backend, model_id: str) -> dict[str, Any]:
    """Poll until the job is final, with a progress bar on a terminal."""
    with ProgressBar(f"{args.name}", enabled=progress_wanted(args.json)) as bar:

        def fetch() -> dict[str, Any]:
            found = backend.fetch(model_id)
            bar.show_submission(found)
            return found

        return wait_until_final(fetch, args.timeout, backend.poll_s)


# -- where the submission goes ---------------------------------------------------------------
class Backend:
    """The local database or a server: submit, read, and what the gate needs."""

    poll_s = LOCAL_POLL_S

    def check_baseline(self, model_id: str, task: str) -> None:
        """A usage error unless ``model_id`` exists on ``task`` (before anything is stored)."""
        found = self.fetch(model_id, missing_ok=False)
        if found.get("task") != task:
            raise CliError(
                f"--compare-to {model_id} is on task {found.get('task')!r}, not {task!r}"
            )

    def submit(self, args: argparse.Namespace) -> str:
        raise NotImplementedError

    def fetch(self, model_id: str, *, missing_ok: bool = True) -> dict[str, Any]:
        raise NotImplementedError

    def board_entry(self, found: dict[str, Any]) -> dict[str, Any] | None:
        """The model's entry (rank, score, Dynascore) on its task's leaderboard as the JSON
        leaderboard gives it without weights (the default view's, else the task's)."""
        raise NotImplementedError

    def compare(self, model_id: str, other_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Local(Backend):
    """The configured database; a ``dynaeval worker`` on it runs the job."""

    def __init__(self, task: TaskSpec) -> None:
        self.task = task
        self.service: Service = open_service()

    def submit(self, args: argparse.Namespace) -> str:
        """Submit a tarball file or a registry reference to the local database."""
        from configs.vocabulary.capabilities import BadRequirements, Requirements
        from usecases.submissions import SubmissionRefused, submit_file, submit_reference

        path = Path(args.model)
        if path.exists() and not path.is_file():
            raise CliError(f"{args.model} is not a file: give a `docker save` tarball")
        publish = self.task.publish_results if args.publish is None else args.publish
        try:
            needs = Requirements.parse(requirements_of(args))
        except BadRequirements as exc:
            raise CliError(f"--require: {exc}") from None
        try:
            if path.is_file():
                submitted = submit_file(
                    self.service,
                    self.task,
                    args.name,
                    path,
                    args.protocol,
                    published=publish,
                    requirements=needs,
                )
            else:
                # Trusted local use (like submit_file reading any path): the CLI's user
                # already has this machine's engine and network, so a registry on loopback
                # or the LAN is not refused here; the API applies the operator allow-list.
                submitted = submit_reference(
                    self.service,
                    self.task,
                    args.name,
                    args.model,
                    args.protocol,
                    trusted=True,
                    published=publish,
                    requirements=needs,
                )
        except SubmissionRefused as exc:
            raise _refusal(exc.code, exc.message) from None
        return submitted.model_id

    def fetch(self, model_id: str, *, missing_ok: bool = True) -> dict[str, Any]:
        found = self.service.queries.submission(model_id)
        if found is None and not missing_ok:
            raise CliError(f"no submission {model_id!r}")
        return found or {"id": model_id}

    def board_entry(self, found: dict[str, Any]) -> dict[str, Any] | None:
        from usecases.boards.viewing import board_for_viewer

        task = self.service.tasks.get(self.task.name) or self.task
        return _entry_of(board_for_viewer(self.service, task), found["id"])

    def compare(self, model_id: str, other_id: str) -> dict[str, Any]:
        from configs.vocabulary.refusals import Refused
        from usecases.compare import compare

        try:
            return compare(self.service, model_id, other_id)
        except Refused as exc:
            raise CliError(f"--compare-to {other_id}: {exc.code}: {exc.message}") from None

    def close(self) -> None:
        self.service.close()


class Remote(Backend):
    """A Dynaeval server (``--server``); the API token is ``$DYNAEVAL_API_KEY``, else the one
    ``dynaeval login`` stored for that server (``client.credentials``)."""

    poll_s = REMOTE_POLL_S

    def __init__(self, args: argparse.Namespace) -> None:
        from client.credentials import token_for
        from client.sdk import DynabenchClient

        self.server = args.server
        self.client: DynabenchClient = DynabenchClient(
            api_key=token_for(args.server), url=args.server
        )

    def _call(self, call: Callable[[], Any]) -> Any:
        """Server errors keep their code; a refused image is a Refused, anything else (and
        an unreachable server) a usage error."""
        import requests

        from client.sdk import ApiClientError

        try:
            return call()
        except ApiClientError as exc:
            if exc.code in IMAGE_REFUSALS:
                raise Refused(exc.code, exc.message) from None
            raise CliError(str(exc)) from None
        except requests.RequestException as exc:
            raise CliError(f"cannot reach {self.server}: {exc}") from None

    def submit(self, args: argparse.Namespace) -> str:
        from client.uploads import UploadInterrupted, UploadMismatch

        key = args.idempotency_key or str(uuid.uuid4())
        bar = ProgressBar("uploading", enabled=progress_wanted(args.json))
        try:
            with bar:
                created = self._call(
                    lambda: self.client.submit_model(
                        args.model,
                        args.task,
                        args.name,
                        protocol=args.protocol,
                        idempotency_key=key,
                        publish=args.publish,
                        requirements=requirements_of(args),
                        progress=lambda sent, size: bar.update(
                            sent / size, f"{sent / 2**20:,.0f} of {size / 2**20:,.0f} MiB"
                        ),
                        upload_id=getattr(args, "upload_id", None),
                        started=lambda upload_id: print(
                            f"dynaeval submit: upload {upload_id} started; if this stops, "
                            f"the same command with --upload-id {upload_id} "
                            f"--idempotency-key {key} resumes it",
                            file=sys.stderr,
                            flush=True,
                        ),
                    )
                )
        except UploadInterrupted as exc:
            raise CliError(
                f"{exc}\nResume it: the same command with --upload-id {exc.upload_id}"
                f" --idempotency-key {key}"
            ) from None
        except UploadMismatch as exc:
            raise CliError(str(exc)) from None
        except CliError as exc:  # say how to find out whether it landed, without a second one
            if not str(exc).startswith("cannot reach"):
                raise
            raise CliError(
                f"{exc}\nThe server may have received it: the same command with "
                f"--idempotency-key {key} returns that submission if so, and makes it once "
                "if not."
            ) from None
        if created.get("retried"):
            what = (
                "the server had accepted the first one (charged once)"
                if created.get("replayed")
                else "the retry was accepted"
            )
            print(
                f"dynaeval submit: no answer in time, retried {created['retried']}x with the "
                f"same idempotency key: {what}; submission {created['id']}",
                file=sys.stderr,
            )
        return str(created["id"])

    def fetch(self, model_id: str, *, missing_ok: bool = True) -> dict[str, Any]:
        found: dict[str, Any] = self._call(lambda: self.client.api.submission(model_id))
        return found

    def board_entry(self, found: dict[str, Any]) -> dict[str, Any] | None:
        # the SDK reads every page: a model ranked past the first is found too
        board = self._call(lambda: self.client.leaderboard(found["task"]))
        return _entry_of(board, found["id"])

    def compare(self, model_id: str, other_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self._call(lambda: self.client.api.compare(model_id, other_id))
        return found


def _entry_of(board: Mapping[str, Any], model_id: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = next(
        (m for m in board.get("models", []) if m.get("model_id") == model_id), None
    )
    return found


def _refusal(code: str, message: str) -> Refused | CliError:
    """A broken or oversized image is a refusal (exit 2); any other problem a usage error."""
    if code in IMAGE_REFUSALS:
        return Refused(code, message)
    return CliError(message)


# -- the verdict -----------------------------------------------------------------------------
def _verdict(
    args: argparse.Namespace, backend: Backend, found: dict[str, Any], thresholds: list[Threshold]
) -> int:
    """Exit 2 when the job failed, 1 when a threshold is missed or the drop is significant."""
    job = found.get("job") or {}
    if job.get("status") == "failed":
        _show_submission(args, found)
        failure = job.get("failure") or {}
        print(
            f"submission {found['id']} failed: {failure.get('code')}: {failure.get('message')}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    values = dict(found.get("results") or {})
    if any(t.metric in BOARD_METRICS for t in thresholds):
        entry = backend.board_entry(found) or {}
        values["dynascore"], values["rank"] = entry.get("score"), entry.get("rank")
    checks = [_check(t, values.get(t.metric)) for t in thresholds]
    comparison = backend.compare(found["id"], args.compare_to) if args.compare_to else None
    dropped = bool(comparison and comparison["significant_drop"])
    passed = all(c["passed"] for c in checks) and not dropped
    gate = {"passed": passed, "thresholds": checks, "comparison": comparison}
    _show_submission(args, found, gate)
    for check in checks:
        if not check["passed"]:
            rank = check["metric"] == "rank"
            shown = (
                "missing" if check["value"] is None else f"{check['value']:.{0 if rank else 2}f}"
            )
            missed = "worse than" if rank else "under"
            print(f"{check['metric']} {shown} is {missed} {check['threshold']:g}", file=sys.stderr)
    if comparison is not None:
        print(render.comparison(comparison), file=sys.stderr if args.json else sys.stdout)
    return EXIT_PASS if passed else EXIT_BELOW


def _check(threshold: Threshold, value: Any) -> dict[str, Any]:
    number = float(value) if isinstance(value, int | float) else None
    ok = number is not None and math.isfinite(number) and threshold.passes(number)
    return {"metric": threshold.metric, "threshold": threshold.value, "value": number, "passed": ok}


def _show_refusal(args: argparse.Namespace, exc: Refused) -> int:
    if args.json:
        render.emit_json(
            {"status": "refused", "failure": {"code": exc.code, "message": exc.message}}
        )
    print(f"dynaeval submit: {exc.code}: {exc.message} (nothing was stored)", file=sys.stderr)
    return EXIT_FAILED


def _show_submission(
    args: argparse.Namespace, found: dict[str, Any], gate: dict[str, Any] | None = None
) -> None:
    """The submission as JSON (its job status on top, the gate's checks when gated, for CI)
    or a line or two of text."""
    if args.json:
        shown = {**found, "status": job_status(found)}
        if gate is not None:
            shown["gate"] = gate
        render.emit_json(shown)
        return
    print(render.submission(found))


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


def requirements_of(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--require`` pairs as one requirements object (None when none was given); labels
    given twice add up, any other key given twice is a usage error, and so is a set the
    server would refuse: checked here, before gigabytes are uploaded to hear it."""
    from configs.vocabulary.capabilities import BadRequirements, Requirements

    found: dict[str, Any] = {}
    for key, value in getattr(args, "require", None) or []:
        if key == "labels":
            found["labels"] = [*found.get("labels", []), *value]
        elif key in found:
            raise CliError(f"--require {key}= is given twice")
        else:
            found[key] = value
    try:
        Requirements.parse(found or None)
    except BadRequirements as exc:
        raise CliError(f"--require: {exc}") from None
    return found or None
