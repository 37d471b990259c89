"""The HTTP model protocol client: batches, timeouts, and validation of every reply.

Speaks protocol v1 (``/health``, ``/predict`` with uids) and the Dynalab 2.0 dialect
(``/model/batch_evaluation``, matched by position). Every failure raises EvaluationError
with a FailureCode; nothing is retried silently and no wait is unbounded.
"""

from __future__ import annotations

import http.client
import json
import select
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from configs.schema import TaskSpec
from evaluator.errors import EvaluationError, FailureCode
from evaluator.runtime import Endpoint, Limits
from evaluator.types import Example, Prediction

_POLL_S = 0.05


class ModelClient:
    """One keep-alive HTTP/1.1 connection to a started model."""

    def __init__(self, endpoint: Endpoint, task: TaskSpec, limits: Limits) -> None:
        if endpoint.protocol not in ("v1", "dynalab2"):
            raise ValueError(f"unknown protocol {endpoint.protocol!r}")
        self.endpoint = endpoint
        self.task = task
        self.limits = limits
        self._conn: http.client.HTTPConnection | None = None
        self._labels = frozenset(task.labels)

    # -- connection -------------------------------------------------------------------------
    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._conn is not None and _dropped(self._conn):
            # The model closed an idle keep-alive connection (uvicorn does after 5 s, and
            # perturbing a round can take longer): open a new one rather than call it a crash.
            self.close()
        if self._conn is None:
            self._conn = http.client.HTTPConnection(
                self.endpoint.host, self.endpoint.port, timeout=timeout
            )
            self._conn.connect()
            # Headers and body go out in one write already; NODELAY avoids delayed-ACK stalls.
            self._conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._conn.sock.settimeout(timeout)
        return self._conn

    def close(self) -> None:
        """Drop the connection (a new one opens on the next call)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _request(
        self, method: str, path: str, body: bytes | None, timeout: float
    ) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            conn = self._connection(timeout)
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, self._read_limited(response)
        except TimeoutError:
            self.close()
            raise EvaluationError(
                FailureCode.REQUEST_TIMEOUT, f"{method} {path} got no reply within {timeout:g} s"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise EvaluationError(
                FailureCode.CRASHED, f"{method} {path} failed: {type(exc).__name__}: {exc}"
            ) from None

    def _read_limited(self, response: http.client.HTTPResponse) -> bytes:
        limit = self.limits.max_reply_bytes
        length = response.getheader("Content-Length")
        if length is not None and length.isdigit() and int(length) > limit:
            response.close()  # the response holds the socket's file: close both
            self.close()
            raise EvaluationError(
                FailureCode.REPLY_TOO_LARGE, f"reply of {length} bytes exceeds {limit} bytes"
            )
        data = response.read(limit + 1)
        if len(data) > limit:
            response.close()
            self.close()
            raise EvaluationError(FailureCode.REPLY_TOO_LARGE, f"reply exceeds {limit} bytes")
        if response.will_close:
            self.close()
        return data

    # -- readiness --------------------------------------------------------------------------
    def wait_ready(self, budget_s: float, alive: Callable[[], bool] = lambda: True) -> float:
        """Poll the readiness rule until it holds; returns seconds waited."""
        started = time.monotonic()
        deadline = started + budget_s
        while time.monotonic() < deadline:
            if not alive():
                raise EvaluationError(FailureCode.CRASHED, "the model exited before it was ready")
            if self._ready_once(min(2.0, max(0.1, deadline - time.monotonic()))):
                return time.monotonic() - started
            time.sleep(_POLL_S)
        raise EvaluationError(
            FailureCode.NEVER_HEALTHY, f"the model was not ready within {budget_s:g} s"
        )

    def _ready_once(self, timeout: float) -> bool:
        probes = [("/health", False)]
        if self.endpoint.protocol == "dynalab2":
            probes = [("/openapi.json", False), ("/", True)]
        for path, any_status in probes:
            try:
                status, _ = self._request("GET", path, None, timeout)
            except EvaluationError:
                return False
            if status == 200 or any_status:
                return True
        return False

    # -- prediction -------------------------------------------------------------------------
    def predict(
        self, examples: Sequence[Example], timeout: float | None = None
    ) -> list[Prediction]:
        """Send one batch and return validated predictions in the same order."""
        timeout = self.limits.request_s if timeout is None else timeout
        if self.endpoint.protocol == "dynalab2":
            path = "/model/batch_evaluation"
            payload: Any = {"dataset_samples": [dict(e.inputs) for e in examples]}
        else:
            path = "/predict"
            payload = {
                "task": self.task.name,
                "instances": [e.request_instance() for e in examples],
            }
        status, data = self._request("POST", path, json.dumps(payload).encode(), timeout)
        if status != 200:
            snippet = data[:200].decode("utf-8", "replace")
            raise EvaluationError(
                FailureCode.BAD_STATUS, f"POST {path} answered {status}: {snippet}"
            )
        try:
            reply = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            raise EvaluationError(
                FailureCode.BAD_JSON, f"POST {path} did not answer JSON"
            ) from None
        items = self._reply_items(reply)
        return validate_predictions(
            self.task, examples, items, keyed=self.endpoint.protocol == "v1"
        )

    def _reply_items(self, reply: Any) -> list[Any]:
        if self.endpoint.protocol == "dynalab2":
            if not isinstance(reply, list):
                raise EvaluationError(FailureCode.BAD_JSON, "batch_evaluation must answer a list")
            return reply
        if not isinstance(reply, dict) or not isinstance(reply.get("predictions"), list):
            raise EvaluationError(FailureCode.BAD_JSON, 'reply must be {"predictions": [...]}')
        return reply["predictions"]


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """Whether the peer closed an idle connection: readable before a request means EOF."""
    if conn.sock is None:
        return True
    poller = select.poll()  # poll, not select: worker processes may hold fds above 1024
    poller.register(conn.sock, select.POLLIN)
    return bool(poller.poll(0))


def validate_predictions(
    task: TaskSpec, examples: Sequence[Example], items: list[Any], *, keyed: bool
) -> list[Prediction]:
    """Check count, order, uids and label set; return Predictions (uids from the examples)."""
    if len(items) != len(examples):
        raise EvaluationError(
            FailureCode.WRONG_COUNT, f"sent {len(examples)} instances, got {len(items)} predictions"
        )
    key = task.output_key
    labels = frozenset(task.labels)
    predictions = []
    for position, (example, item) in enumerate(zip(examples, items, strict=True)):
        if not isinstance(item, dict):
            raise EvaluationError(
                FailureCode.BAD_PREDICTION, f"prediction {position} is not an object"
            )
        if keyed and item.get("uid") != example.uid:
            _raise_uid_mismatch(examples, items, position)
        output = item.get(key)
        if not isinstance(output, str):
            raise EvaluationError(
                FailureCode.BAD_PREDICTION, f"prediction {position} has no string {key!r}"
            )
        if labels and output not in labels:
            raise EvaluationError(
                FailureCode.LABEL_OUTSIDE_SET,
                f"prediction {position} label {output[:50]!r} is not one of {sorted(labels)}",
            )
        probs = item.get("probs", item.get("prob"))
        predictions.append(
            Prediction(example.uid, output, probs if isinstance(probs, dict) else None)
        )
    return predictions


def _raise_uid_mismatch(examples: Sequence[Example], items: list[Any], position: int) -> None:
    sent = [e.uid for e in examples]
    got = [item.get("uid") if isinstance(item, dict) else None for item in items]
    if all(isinstance(uid, str) for uid in got) and sorted(got) == sorted(sent):
        raise EvaluationError(
            FailureCode.WRONG_ORDER, f"predictions are not in the order sent (position {position})"
        )
    raise EvaluationError(
        FailureCode.BAD_PREDICTION,
        f"prediction {position} has uid {got[position]!r}, expected {sent[position]!r}",
    )
