"""The HTTP model protocol client: batches, timeouts, and validation of every reply.

Speaks protocol v1 (``/health``, ``/predict`` with opaque per-request ids, never dataset
uids) and the Dynalab 2.0 dialect (``/model/batch_evaluation``, matched by position). Every
failure raises EvaluationError with a FailureCode; nothing is retried silently, no wait is
unbounded, and a request's time limit is a deadline for the whole exchange.
"""

from __future__ import annotations

import http.client
import json
import select
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from configs.schema import Limits, TaskSpec
from configs.vocabulary.examples import Example, Prediction
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.transport.deadlines import RequestDeadline
from evaluator.transport.endpoint import Endpoint
from evaluator.transport.quickack import QuickAckConnection
from evaluator.transport.wire_ids import WireIds

_POLL_S = 0.05


class ModelClient:
    """One keep-alive HTTP/1.1 connection to a started model.

    ``salt`` keys the wire ids (random by default: one client serves one evaluation).
    """

    def __init__(
        self, endpoint: Endpoint, task: TaskSpec, limits: Limits, *, salt: bytes | None = None
    ) -> None:
        self.endpoint = endpoint
        self.dialect = endpoint.dialect
        self.task = task
        self.limits = limits
        self._conn: http.client.HTTPConnection | None = None
        self._labels = frozenset(task.labels)
        self._wire_ids = WireIds(salt)
        self._deadline = RequestDeadline()
        weakref.finalize(self, self._deadline.stop)  # a client never closed stops it too

    # -- connection -------------------------------------------------------------------------
    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._conn is not None and _dropped(self._conn):
            # The model closed an idle keep-alive connection (uvicorn does after 5 s, and
            # perturbing a round can take longer): open a new one rather than call it a crash.
            self._drop()
        if self._conn is None:
            # Quick ACKs: a server that writes headers and body apart must not pay a
            # delayed-ACK stall per request on the throughput axis (transport/quickack.py).
            self._conn = QuickAckConnection(self.endpoint.host, self.endpoint.port, timeout=timeout)
            self._conn.connect()
        self._conn.sock.settimeout(timeout)
        return self._conn

    def close(self) -> None:
        """Drop the connection and stop the deadline thread (both restart on the next call)."""
        self._drop()
        self._deadline.stop()

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _request(
        self, method: str, path: str, body: bytes | None, timeout: float
    ) -> tuple[int, bytes]:
        """One exchange, finished within ``timeout`` seconds (headers, body and all)."""
        try:
            return self._exchange(method, path, body, time.monotonic() + timeout)
        except EvaluationError:
            raise
        except TimeoutError:
            self._drop()
            raise EvaluationError(
                FailureCode.REQUEST_TIMEOUT,
                f"{method} {path} did not complete within {timeout:g} s",
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            self._drop()
            raise EvaluationError(
                FailureCode.CRASHED, f"{method} {path} failed: {type(exc).__name__}: {exc}"
            ) from None
        except Exception as exc:  # whatever the model sends must not pass for a platform fault
            self._drop()
            raise EvaluationError(
                FailureCode.BAD_STATUS,
                f"{method} {path} answered a malformed HTTP reply: {type(exc).__name__}",
            ) from None

    def _exchange(
        self, method: str, path: str, body: bytes | None, deadline: float
    ) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn = self._connection(max(deadline - time.monotonic(), 0.001))
        self._deadline.arm(conn.sock, deadline)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, self._read_limited(response)
        finally:
            if self._deadline.disarm():
                # The deadline passed and the socket was shut down: whatever the exchange
                # looked like after that (a reset, a short body), it is a timeout.
                raise TimeoutError("request deadline passed")

    def _read_limited(self, response: http.client.HTTPResponse) -> bytes:
        limit = self.limits.max_reply_bytes
        length = response.getheader("Content-Length")
        if length is not None and length.isdigit() and int(length) > limit:
            response.close()  # the response holds the socket's file: close both
            self._drop()
            raise EvaluationError(
                FailureCode.REPLY_TOO_LARGE, f"reply of {length} bytes exceeds {limit} bytes"
            )
        data = response.read(limit + 1)
        if len(data) > limit:
            response.close()
            self._drop()
            raise EvaluationError(FailureCode.REPLY_TOO_LARGE, f"reply exceeds {limit} bytes")
        if response.will_close:
            self._drop()
        return data

    @property
    def one_example_per_request(self) -> bool:
        """Whether the model takes one example per request (its throughput is then a
        single-stream figure, and profiling says so)."""
        return False

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
        for probe in self.dialect.probes:
            try:
                status, _ = self._request("GET", probe.path, None, timeout)
            except EvaluationError:
                return False
            if status == 200 or probe.any_status:
                return True
        return False

    # -- prediction -------------------------------------------------------------------------
    def predict(
        self,
        examples: Sequence[Example],
        timeout: float | None = None,
        *,
        variant: str = "original",
    ) -> list[Prediction]:
        """Send one batch and return validated predictions (with dataset uids) in order.

        ``variant`` names the pass (original, a perturbation, a profiling batch): each pass
        sends the same example under a different opaque wire id.
        """
        timeout = self.limits.request_s if timeout is None else timeout
        wire_ids: list[str] | None = None
        if self.dialect.uses_wire_ids:
            wire_ids = self._wire_ids.assign(variant, [e.uid for e in examples])
        path = self.dialect.predict_path
        payload = self.dialect.batch_payload(self.task.name, examples, wire_ids)
        status, data = self._request("POST", path, json.dumps(payload).encode(), timeout)
        if status != 200:
            snippet = data[:200].decode("utf-8", "replace")
            raise EvaluationError(
                FailureCode.BAD_STATUS, f"POST {path} answered {status}: {snippet}"
            )
        try:
            return self._read_reply(path, data, examples, wire_ids)
        except EvaluationError:
            raise
        except Exception as exc:  # a hostile reply must never pass for a platform fault
            raise EvaluationError(
                FailureCode.BAD_JSON, f"POST {path}: the reply could not be read ({exc!r:.200})"
            ) from None

    def _read_reply(
        self, path: str, data: bytes, examples: Sequence[Example], wire_ids: list[str] | None
    ) -> list[Prediction]:
        try:
            reply = json.loads(data)
        except Exception:  # ValueError, UnicodeDecodeError, RecursionError on deep nesting
            raise EvaluationError(
                FailureCode.BAD_JSON, f"POST {path} did not answer JSON"
            ) from None
        items = self.dialect.reply_items(reply)
        return validate_predictions(self.task, examples, items, wire_ids)


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """Whether the peer closed an idle connection: readable before a request means EOF."""
    if conn.sock is None:
        return True
    poller = select.poll()  # poll, not select: worker processes may hold fds above 1024
    poller.register(conn.sock, select.POLLIN)
    return bool(poller.poll(0))


def validate_predictions(
    task: TaskSpec,
    examples: Sequence[Example],
    items: list[Any],
    wire_ids: Sequence[str] | None = None,
) -> list[Prediction]:
    """Check count, order, echoed wire ids (None: matched by position) and label set;
    return Predictions carrying the examples' dataset uids."""
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
        if wire_ids is not None and item.get("uid") != wire_ids[position]:
            _raise_uid_mismatch(wire_ids, items, position)
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
        probs = _probs(item.get("probs", item.get("prob")))
        predictions.append(Prediction(example.uid, output, probs))
    return predictions


def _probs(value: Any) -> dict[str, float] | None:
    """Optional, unscored probabilities: kept only as a flat {label: number} object."""
    if not isinstance(value, Mapping):
        return None
    for key, number in value.items():
        if not isinstance(key, str) or isinstance(number, bool):
            return None
        if not isinstance(number, int | float):
            return None
    return dict(value)


def _raise_uid_mismatch(sent: Sequence[str], items: list[Any], position: int) -> None:
    got = [item.get("uid") if isinstance(item, dict) else None for item in items]
    uids = [uid for uid in got if isinstance(uid, str)]
    if len(uids) == len(got) and sorted(uids) == sorted(sent):
        raise EvaluationError(
            FailureCode.WRONG_ORDER, f"predictions are not in the order sent (position {position})"
        )
    raise EvaluationError(
        FailureCode.BAD_PREDICTION,
        f"prediction {position} has uid {got[position]!r}, expected {sent[position]!r}",
    )
