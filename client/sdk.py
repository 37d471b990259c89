"""A small Python client for the Dynaeval API (used by the CLI's ``--server`` mode)."""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import requests

from client.credentials import token_for
from client.errors import ApiClientError as ApiClientError  # raised by every call
from client.uploads import RESUMABLE_FROM, Progress, send_upload
from configs.vocabulary.idempotency import IDEMPOTENCY_HEADER
from configs.vocabulary.scopes import DEFAULT_TOKEN_SCOPES
from configs.vocabulary.webhooks import verify_signature as verify_signature  # for receivers
from evaluator.transport.dialects import DEFAULT_DIALECT

FINAL_STATUSES = ("done", "failed")


class WaitTimeout(TimeoutError):
    """A submission did not reach a final state in time; ``submission`` is its last state."""

    def __init__(self, submission: dict[str, Any], timeout: float) -> None:
        status = job_status(submission) or "unknown"
        super().__init__(f"submission {submission.get('id')} is still {status} after {timeout:g} s")
        self.submission, self.timeout = submission, timeout


def job_status(submission: dict[str, Any]) -> str | None:
    """The status of a submission's job (``queued``, ``running``, ``done``, ``failed``)."""
    return (submission.get("job") or {}).get("status")


def wait_until_final(
    fetch: Callable[[], dict[str, Any]], timeout: float, poll: float
) -> dict[str, Any]:
    """Call ``fetch`` every ``poll`` seconds until the job is final; WaitTimeout after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = fetch()
        if job_status(found) in FINAL_STATUSES:
            return found
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimeout(found, timeout)
        time.sleep(min(poll, remaining))


CONNECT_TIMEOUT_S = 10.0
# How fast the server checks an uploaded tarball, at worst: the wait for its answer grows
# by a second per this many bytes (a 185 MB upload waits 60 s + 37 s).
SERVER_CHECK_BYTES_PER_S = 5 * 1024**2
SUBMIT_RETRIES = 2  # retries of a submission (same idempotency key) after a timeout
# A retry that finds its upload still being submitted by the request that timed out waits
# for it, up to BUSY_WAITS x BUSY_WAIT_S (joining and checking gigabytes takes minutes).
BUSY_WAITS, BUSY_WAIT_S = 60, 5.0


class DynaevalClient:
    """``DynaevalClient("http://127.0.0.1:8000").submit_image("sentiment", "m", "m.tar")``"""

    def __init__(self, base_url: str, timeout: float = 60.0, api_key: str | None = None) -> None:
        self.base = base_url.rstrip("/") + "/api/v1"
        self.timeout = timeout
        self.http = requests.Session()
        # No key given: the one `dynaeval login` stored (or `serve` made on this machine).
        api_key = api_key or token_for(base_url)
        if api_key:
            self.http.headers["Authorization"] = f"Bearer {api_key}"

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """The reply's JSON object (``{}`` for an empty reply); ApiClientError for an error
        or for a reply that is not a JSON object (not the API's: a proxy's page, say)."""
        kwargs.setdefault("timeout", self.timeout)
        response = self.http.request(method, self.base + path, **kwargs)
        try:
            body = response.json()
        except ValueError:  # an empty reply is an empty object; anything else is not one
            body = {} if not response.content.strip() else response.text
        if response.status_code >= 400:
            error = body.get("error", {}) if isinstance(body, dict) else {}
            raise ApiClientError(
                response.status_code,
                error.get("code", "http_error"),
                error.get("message", response.text[:200]),
            )
        if not isinstance(body, dict):
            raise ApiClientError(
                response.status_code,
                "bad_reply",
                f"{method} {path}: the reply is not a JSON object "
                f"({response.headers.get('Content-Type', 'no content type')}: {response.text[:80]!r})",
            )
        return body

    def _items(self, path: str, key: str, **kwargs: Any) -> list[dict[str, Any]]:
        """The list under ``key`` of ``GET path``'s reply."""
        items: list[dict[str, Any]] = self._call("GET", path, **kwargs)[key]
        return items

    def tasks(self) -> list[dict[str, Any]]:
        return self._items("/tasks", "tasks")

    def submit(
        self,
        task: str,
        name: str,
        runtime: dict[str, Any],
        *,
        idempotency_key: str | None = None,
        publish: bool | None = None,
        requirements: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Submit a runtime (a registry image). Sent with an idempotency key (a new UUID
        unless given) and retried with it when the server cannot be reached or does not
        answer in time: the server makes one submission whatever the retries, and answers
        a replay with ``replayed: true``. ``publish``: results public once scored (None:
        the task's default). ``requirements``: what the worker must have, e.g.
        ``{"gpus": 1, "labels": ["eu"]}`` (only such a worker runs it)."""
        body: dict[str, Any] = {"name": name, "runtime": runtime}
        return self._submit_json(task, body, idempotency_key, publish, requirements)

    def submit_image(
        self,
        task: str,
        name: str,
        tarball: str | Path,
        protocol: str = DEFAULT_DIALECT,
        *,
        idempotency_key: str | None = None,
        publish: bool | None = None,
        requirements: dict[str, Any] | None = None,
        resumable: bool | None = None,
        upload_id: str | None = None,
        progress: Progress | None = None,
        started: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Upload a ``docker save`` tarball, idempotently (see :meth:`submit`, also for
        ``requirements``). One of 64 MiB or more (or with ``resumable=True``) goes as a
        resumable upload: in parts, each checked and retried, with ``progress(sent, all)``
        called as they arrive and ``started(upload_id)`` before the first (keep the id:
        ``upload_id`` resumes one a dead process left unfinished; :meth:`uploads` lists
        yours).
        The wait for the answer grows with the file: the server checks the whole tarball."""
        key = idempotency_key or str(uuid.uuid4())
        size = Path(tarball).stat().st_size
        timeout = (CONNECT_TIMEOUT_S, self.timeout + size / SERVER_CHECK_BYTES_PER_S)
        if resumable or upload_id or (resumable is None and size >= RESUMABLE_FROM):
            sent = send_upload(
                self, task, tarball, upload_id=upload_id, progress=progress, started=started
            )
            body: dict[str, Any] = {"name": name, "upload": sent, "protocol": protocol}
            return self._submit_json(task, body, key, publish, requirements, timeout)
        form = {"name": name, "protocol": protocol}
        if publish is not None:
            form["publish"] = "true" if publish else "false"
        if requirements:
            form["requirements"] = json.dumps(requirements)

        def upload() -> dict[str, Any]:
            with open(tarball, "rb") as handle:
                return self._call(
                    "POST",
                    f"/tasks/{task}/submissions",
                    data=form,
                    files={"image": (Path(tarball).name, handle)},
                    headers={IDEMPOTENCY_HEADER: key},
                    timeout=timeout,
                )

        return self._submit_retried(upload)

    def uploads(self) -> list[dict[str, Any]]:
        """Your unfinished resumable uploads, oldest first."""
        found: list[dict[str, Any]] = self._call("GET", "/uploads")["uploads"]
        return found

    def upload(self, upload_id: str) -> dict[str, Any]:
        """Where a resumable upload of yours stands (its parts stored)."""
        return self._call("GET", f"/uploads/{upload_id}")

    def drop_upload(self, upload_id: str) -> None:
        """Drop an unfinished resumable upload of yours."""
        self._call("DELETE", f"/uploads/{upload_id}")

    def _submit_json(
        self,
        task: str,
        body: dict[str, Any],
        idempotency_key: str | None,
        publish: bool | None,
        requirements: dict[str, Any] | None,
        timeout: float | tuple[float, float] | None = None,
    ) -> dict[str, Any]:
        """POST a JSON submission (``body`` with the options set), retried with one key."""
        key = idempotency_key or str(uuid.uuid4())
        if publish is not None:
            body["publish"] = publish
        if requirements:
            body["requirements"] = requirements
        return self._submit_retried(
            lambda: self._call(
                "POST",
                f"/tasks/{task}/submissions",
                json=body,
                headers={IDEMPOTENCY_HEADER: key},
                timeout=timeout or self.timeout,
            )
        )

    def _submit_retried(self, send: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``send`` again (same key) after a timeout or a lost connection; the answer says
        ``retried`` how many times it took, and ``replayed`` when the first one had landed."""
        busy_waits = 0
        retry = 0
        while True:
            try:
                answer = send()
            except (requests.Timeout, requests.ConnectionError):
                if retry == SUBMIT_RETRIES:
                    raise
                time.sleep(min(2.0**retry, 10.0))
                retry += 1
                continue
            except ApiClientError as exc:
                # the request that timed out is still joining the upload: once it lands,
                # the same key answers with its submission
                if exc.code != "upload_busy" or not retry or busy_waits == BUSY_WAITS:
                    raise
                busy_waits += 1
                time.sleep(BUSY_WAIT_S)
                continue
            return answer | ({"retried": retry} if retry else {})

    def submission(self, model_id: str) -> dict[str, Any]:
        return self._call("GET", f"/submissions/{model_id}")

    def submissions(
        self, task: str | None = None, page_size: int = 100, fields: list[str] | None = None
    ) -> list[dict[str, Any]]:
        """Every submission you may see (of ``task`` when given), newest first, following
        the list's ``next_cursor`` page by page; ``fields`` (e.g. ``["name", "job"]``)
        keeps only those of each (``id`` always), and the server reads only what they need."""
        found: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": page_size, **({"task": task} if task else {})}
        if fields:
            params["fields"] = ",".join(fields)
        while True:
            page = self._call("GET", "/submissions", params=params)
            found += page["submissions"]
            if not page.get("next_cursor"):
                return found
            params["cursor"] = page["next_cursor"]

    def cancel(self, model_id: str) -> dict[str, Any]:
        """Stop a submission's evaluation (queued: at once; running: at its next step)."""
        return self._call("POST", f"/submissions/{model_id}/cancel")

    def rerun(self, model_id: str) -> dict[str, Any]:
        """Evaluate a submission again (its task's owner or an admin)."""
        return self._call("POST", f"/submissions/{model_id}/rerun")

    def leaderboard(
        self,
        task: str,
        weights: str | None = None,
        *,
        rounds: str | None = None,
        page_size: int = 1000,
    ) -> dict[str, Any]:
        """The whole leaderboard under ``weights`` (``"axis:n,..."``) and ``rounds``
        (``"round:n,..."``), read a page at a time: every ranked model, the tie groups
        (each once) and the flip weights of every adjacent pair."""
        params: dict[str, Any] = {"limit": page_size}
        if weights:
            params["weights"] = weights
        if rounds:
            params["rounds"] = rounds
        board = self._call("GET", f"/tasks/{task}/leaderboard", params={**params, "offset": 0})
        groups = {group["group"]: dict(group) for group in board["tie_groups"]}
        while len(board["models"]) < board["total_models"]:
            page = self._call(
                "GET",
                f"/tasks/{task}/leaderboard",
                params={**params, "offset": len(board["models"])},
            )
            if not page["models"]:  # the board shrank meanwhile: what was read is the answer
                break
            board["models"] += page["models"]
            board["flip_weights"] += page["flip_weights"]
            for group in page["tie_groups"]:  # a group running over pages: its ids joined
                known = groups.setdefault(group["group"], {**group, "model_ids": []})
                known["model_ids"] = known["model_ids"] + group["model_ids"]
        board["tie_groups"] = [groups[number] for number in sorted(groups)]
        board["offset"], board["limit"] = 0, None
        return board

    def me(self) -> dict[str, Any]:
        """Who this client's token belongs to: name, role, scopes, owned tasks."""
        return self._call("GET", "/me")

    def tokens(self) -> list[dict[str, Any]]:
        """Your API tokens (never their secrets)."""
        return self._items("/tokens", "tokens")

    def create_token(
        self, name: str, scopes: list[str] | None = None, expires_in_days: float | None = None
    ) -> dict[str, Any]:
        """A new token of yours; its secret is in ``token``, shown this once."""
        body: dict[str, Any] = {"name": name, "scopes": scopes or list(DEFAULT_TOKEN_SCOPES)}
        if expires_in_days is not None:
            body["expires_in_days"] = expires_in_days
        return self._call("POST", "/tokens", json=body)

    def revoke_token(self, token_id: str) -> dict[str, Any]:
        return self._call("DELETE", f"/tokens/{token_id}")

    def rotate_token(self, token_id: str) -> dict[str, Any]:
        """The replacement (with its secret); the old token is revoked."""
        return self._call("POST", f"/tokens/{token_id}/rotate")

    # -- webhooks (verify what they send with ``verify_signature``) ---------------------------
    def create_webhook(
        self, url: str, model_id: str | None = None, events: list[str] | None = None
    ) -> dict[str, Any]:
        """A webhook on your submissions (or on ``model_id``); its ``secret`` is shown once."""
        body: dict[str, Any] = {"url": url, "model_id": model_id}
        if events is not None:
            body["events"] = events
        return self._call("POST", "/webhooks", json=body)

    def webhooks(self) -> list[dict[str, Any]]:
        return self._items("/webhooks", "webhooks")

    def delete_webhook(self, webhook_id: str) -> dict[str, Any]:
        return self._call("DELETE", f"/webhooks/{webhook_id}")

    def rotate_webhook_secret(self, webhook_id: str) -> dict[str, Any]:
        return self._call("POST", f"/webhooks/{webhook_id}/rotate-secret")

    def webhook_deliveries(self, webhook_id: str) -> list[dict[str, Any]]:
        return self._items(f"/webhooks/{webhook_id}/deliveries", "deliveries")

    def test_webhook(self, webhook_id: str) -> dict[str, Any]:
        """Queue a ``ping`` delivery; see ``webhook_deliveries`` for how it went."""
        return self._call("POST", f"/webhooks/{webhook_id}/test")

    def rounds(self, task: str) -> dict[str, Any]:
        """The task's rounds: weights and each dataset's hash, size and version (no examples)."""
        return self._call("GET", f"/tasks/{task}/rounds")

    def add_round(
        self,
        task: str,
        round_name: str,
        data: str | Path,
        dataset: str = "test",
        weight: float | None = None,
    ) -> dict[str, Any]:
        """Add a dataset (JSONL) to ``round_name``, creating the round when it is new; the same
        content again changes nothing (``created`` is false)."""
        exists = any(r["name"] == round_name for r in self.rounds(task)["rounds"])
        target = f"/tasks/{task}/rounds" + (f"/{round_name}/datasets" if exists else "")
        form = {"dataset": dataset} if exists else {"dataset": dataset, "name": round_name}
        if weight is not None and not exists:
            form["weight"] = str(weight)
        with open(data, "rb") as stream:
            change: dict[str, Any] = self._call(
                "POST", target, data=form, files={"data": (Path(data).name, stream)}
            )
        if exists and weight is not None:
            change = {**change, "round": self.set_round_weight(task, round_name, weight)["round"]}
        return change

    def create_task(self, spec: str | Path, data: Mapping[str, str | Path]) -> dict[str, Any]:
        """Create a task (an admin or an author) from a spec file (YAML or JSON) and one
        JSONL file per dataset, keyed ``ROUND`` (dataset ``test``) or ``ROUND/DATASET``."""
        with contextlib.ExitStack() as stack:
            files = {
                f"data/{key}": (Path(path).name, stack.enter_context(open(path, "rb")))
                for key, path in data.items()
            }
            form = {"spec": Path(spec).read_text(encoding="utf-8")}
            created: dict[str, Any] = self._call("POST", "/tasks", data=form, files=files)
        return created

    def set_round_weight(self, task: str, round_name: str, weight: float) -> dict[str, Any]:
        return self._call("PATCH", f"/tasks/{task}/rounds/{round_name}", json={"weight": weight})

    def compare(self, model_id: str, other_id: str) -> dict[str, Any]:
        """``model_id`` minus ``other_id`` on the task metric, paired bootstrap 95 % interval
        (computed by the server: held-out labels never leave it)."""
        return self._call("GET", f"/submissions/{model_id}/compare/{other_id}")

    def wait(
        self,
        model_id: str,
        timeout: float = 3600,
        poll: float = 2.0,
        on_poll: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """The submission once its job is done or failed; raises WaitTimeout (a
        TimeoutError carrying the last state) when ``timeout`` seconds pass first.
        ``on_poll`` sees every state fetched (a progress bar, say)."""

        def fetch() -> dict[str, Any]:
            found = self.submission(model_id)
            if on_poll is not None:
                on_poll(found)
            return found

        return wait_until_final(fetch, timeout, poll)


# Dynabench names per-round results ``round<k>_<metric>``: k counts the task's rounds from 1 in
# their configured order (``dynaeval tasks``), whatever the rounds are called (our sentiment
# round ``r1`` is ``round1``), and the metric is abbreviated as below.
METRIC_ABBREVIATIONS = {"accuracy": "acc", "macro_f1": "f1", "squad_f1": "f1", "exact_match": "em"}


def metric_abbreviation(metric: str) -> str:
    """``accuracy`` -> ``acc``, ``macro_f1``/``squad_f1`` -> ``f1``, ``exact_match`` -> ``em``;
    a metric not listed keeps its own name."""
    return METRIC_ABBREVIATIONS.get(metric, metric)


def dynabench_round_keys(results: dict[str, Any]) -> dict[str, Any]:
    """``round<k>_<metric>`` (the round's performance), the metrics reported beside it
    (``round<k>_bleu`` beside ``round<k>_chrf``, ``round<k>_em`` beside ``round<k>_f1``) and
    ``round<k>_robustness`` / ``round<k>_fairness``, from our per-round rows and scores."""
    own = str(results.get("metric") or "performance")
    beside = _secondary_by_round(results, own)
    keys: dict[str, Any] = {}
    for k, row in enumerate(results.get("rounds") or [], start=1):
        keys[f"round{k}_{metric_abbreviation(own)}"] = row.get("performance")
        for metric, value in sorted(beside.get(str(row.get("round")), {}).items()):
            keys.setdefault(f"round{k}_{metric_abbreviation(metric)}", value)
        for axis in ("robustness", "fairness"):
            if axis in row:
                keys[f"round{k}_{axis}"] = row[axis]
    return keys


def _secondary_by_round(results: dict[str, Any], own: str) -> dict[str, dict[str, float]]:
    """Round -> metric -> the mean over the round's sets of each metric reported beside the
    task's own on the original examples (datasets average within a round, as performance)."""
    found: dict[str, dict[str, list[float]]] = {}
    for score in results.get("scores") or []:
        if not isinstance(score, dict) or score.get("variant") != "original" or score.get("slice"):
            continue
        metric = str(score.get("metric"))
        if metric in (own, "agreement") or not isinstance(score.get("value"), int | float):
            continue
        found.setdefault(str(score.get("round")), {}).setdefault(metric, []).append(score["value"])
    return {
        rnd: {metric: sum(values) / len(values) for metric, values in by_metric.items()}
        for rnd, by_metric in found.items()
    }


def _submission_name(description: str) -> str:
    """The description as a submission name (1-128 letters, digits, ' ._-')."""
    name = re.sub(r"[^A-Za-z0-9 ._\-]", "-", description.strip())[:128].strip()
    name = name.lstrip(" ._-")
    return name or "model"


class DynabenchClient:
    """A Dynabench-style SDK over the Dynaeval API (the same HTTP layer as DynaevalClient)::

        client = DynabenchClient(api_key="...", url="http://127.0.0.1:8000")
        model_id = client.submit_model("model.tar", "sentiment", "my model v1")["id"]
        client.wait(model_id)
        client.get_results(model_id)["round1_f1"], client.get_results(model_id)["dynascore"]

    ``api_key`` is sent as ``Authorization: Bearer <api_key>`` on every request.
    """

    def __init__(
        self,
        api_key: str | None = None,
        url: str = "http://127.0.0.1:8000",
        timeout: float = 60.0,
    ) -> None:
        self.api = DynaevalClient(url, timeout=timeout, api_key=api_key)

    def submit_model(
        self,
        path: str | Path,
        task: str,
        description: str,
        *,
        protocol: str = DEFAULT_DIALECT,
        idempotency_key: str | None = None,
        publish: bool | None = None,
        requirements: dict[str, Any] | None = None,
        progress: Progress | None = None,
        upload_id: str | None = None,
        started: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Submit a ``docker save`` tarball (a multipart upload, or a resumable one from
        64 MiB: see :meth:`DynaevalClient.submit_image` for ``progress``, ``started`` and
        ``upload_id``)
        or, when ``path`` is no file, a registry reference; the description names the
        submission. Returns the queued submission (its ``id`` is the model id). Retried on
        a timeout with one idempotency key (a new UUID unless given): the server makes one
        submission. ``requirements``: what the worker must have (``{"gpus": 1}``)."""
        name = _submission_name(description)
        options: dict[str, Any] = {
            "idempotency_key": idempotency_key,
            "publish": publish,
            "requirements": requirements,
        }
        if Path(path).is_file():
            return self.api.submit_image(
                task, name, path, protocol, progress=progress, upload_id=upload_id,
                started=started, **options,
            )  # fmt: skip
        runtime = {"kind": "docker", "image": str(path), "protocol": protocol}
        return self.api.submit(task, name, runtime, **options)

    def wait(self, model_id: str, timeout: float = 3600, poll: float = 2.0) -> dict[str, Any]:
        """The submission once done or failed (WaitTimeout when ``timeout`` passes first)."""
        return self.api.wait(model_id, timeout=timeout, poll=poll)

    def leaderboard(
        self, task: str, weights: str | dict[str, float] | None = None
    ) -> dict[str, Any]:
        """The task's leaderboard; ``weights`` as ``"performance:4,memory:0"`` or a dict."""
        if isinstance(weights, dict):
            weights = ",".join(f"{axis}:{value:g}" for axis, value in weights.items())
        return self.api.leaderboard(task, weights)

    def get_results(self, model_id: str) -> dict[str, Any]:
        """Our full results plus ``status``, ``dynascore`` (the task leaderboard with default
        weights; None while unranked) and Dynabench's ``round<k>_<metric>`` keys."""
        found = self.api.submission(model_id)
        results = dict(found.get("results") or {})
        dynascore = None
        if job_status(found) == "done":
            board = self.api.leaderboard(found["task"])
            entry = next((m for m in board["models"] if m["model_id"] == model_id), None)
            dynascore = entry["dynascore"] if entry else None
        return {
            **results,
            "model_id": model_id,
            "name": found.get("name"),
            "task": found.get("task"),
            "status": job_status(found),
            "dynascore": dynascore,
            **dynabench_round_keys(results),
        }
