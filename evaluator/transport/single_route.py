"""The single-example route: one example per request, over a small pool of connections.

Dynabench's published Dynalab 2.0 templates serve only ``POST /model/single_evaluation``.
Which route a model has is read from its OpenAPI document when it serves one, else learnt
from the batch route answering 404 or 405. Each example then gets its own request and its
own deadline; answers are validated like a batch's, position by position.

Concurrency is 1 by default: the templates run one uvicorn worker whose ``async``
endpoint calls the model synchronously, so a second request in flight only queues behind
the first while its deadline runs, and the throughput measured would be the queue's.
"""

from __future__ import annotations

import enum
import json
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from configs.schema import Limits, TaskSpec
from configs.vocabulary.examples import Example, Prediction
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.transport.channel import Channel
from evaluator.transport.dialects import Dialect
from evaluator.transport.encoding import dump_body
from evaluator.transport.replies import label_folding, validate_one


class Route(enum.Enum):
    """Which of a dialect's prediction routes a model serves."""

    BATCH = "batch"
    SINGLE = "single"


FALLBACK_STATUSES = frozenset({404, 405})  # "no such route" / "not for POST"


def route_from_openapi(dialect: Dialect, document: bytes) -> Route | None:
    """The route the model's OpenAPI document declares for POST (batch preferred), or None
    when the document declares neither or cannot be read: then the batch route is tried."""
    try:
        paths = json.loads(document).get("paths")
    except Exception:  # any malformed document only means "not described"
        return None
    if not isinstance(paths, dict):
        return None
    for route, path in ((Route.BATCH, dialect.predict_path), (Route.SINGLE, dialect.single_path)):
        operations = paths.get(path) if path else None
        if isinstance(operations, dict) and "post" in operations:
            return route
    return None


def configured_concurrency(limits: Limits) -> int:
    """Requests in flight on the single route (the task's ``limits.single_route_concurrency``,
    which the task loader checks is a positive integer)."""
    value = limits.single_route_concurrency
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"single_route_concurrency must be a positive integer, not {value!r}")
    return value


class SingleRoute:
    """Sends a batch as one request per example over ``channels`` (one request in flight
    per channel). The channels stay the caller's: ``close`` only ends the threads."""

    def __init__(self, channels: Sequence[Channel], dialect: Dialect, task: TaskSpec) -> None:
        if not channels or dialect.single_path is None:
            raise ValueError("the single route needs a channel and a dialect that has one")
        self.path = dialect.single_path
        self.dialect = dialect
        self.task = task
        self.concurrency = len(channels)
        self._folding = label_folding(task.labels) if dialect.fold_label_case else {}
        self._idle: queue.SimpleQueue[Channel] = queue.SimpleQueue()
        for channel in channels:
            self._idle.put(channel)
        self._pool: ThreadPoolExecutor | None = None

    def close(self) -> None:
        """End the pool's threads (a later call starts new ones)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def predict(
        self, examples: Sequence[Example], timeout: float, total_deadline: float | None
    ) -> list[Prediction]:
        """Each example in its own request, due within ``timeout`` and ``total_deadline``."""
        if self.concurrency == 1:
            return [
                self._with_channel(position, example, timeout, total_deadline)
                for position, example in enumerate(examples)
            ]
        return self._predict_concurrently(examples, timeout, total_deadline)

    def _predict_concurrently(
        self, examples: Sequence[Example], timeout: float, total_deadline: float | None
    ) -> list[Prediction]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="single-route")
        failed = threading.Event()  # after a failure, requests not yet sent are not sent

        def task(position: int, example: Example) -> Prediction | None:
            if failed.is_set():
                return None
            try:
                return self._with_channel(position, example, timeout, total_deadline)
            except BaseException:
                failed.set()
                raise

        futures = [self._pool.submit(task, i, e) for i, e in enumerate(examples)]
        wait(futures)  # every request in flight ends by its own deadline
        return _in_order(futures)

    def _with_channel(
        self, position: int, example: Example, timeout: float, total_deadline: float | None
    ) -> Prediction:
        channel = self._idle.get()
        try:
            return self._one(channel, position, example, timeout, total_deadline)
        finally:
            self._idle.put(channel)

    def _one(
        self,
        channel: Channel,
        position: int,
        example: Example,
        timeout: float,
        total_deadline: float | None,
    ) -> Prediction:
        body = dump_body(self.dialect.single_payload(example), self.task.image_fields)
        status, data = timed(
            lambda seconds: channel.request("POST", self.path, body, seconds),
            timeout,
            total_deadline,
        )
        if status != 200:
            snippet = data[:200].decode("utf-8", "replace")
            raise EvaluationError(
                FailureCode.BAD_STATUS, f"POST {self.path} answered {status}: {snippet}"
            )
        item = self.dialect.single_item(decode_json(self.path, data))
        return validate_one(self.task, position, example, item, self._folding)


def timed(
    exchange: Callable[[float], tuple[int, bytes]], timeout: float, total_deadline: float | None
) -> tuple[int, bytes]:
    """Run ``exchange(seconds)`` within ``timeout`` and what is left before ``total_deadline``;
    a request cut short by the total deadline is the total budget's timeout, not its own."""
    left = math.inf if total_deadline is None else total_deadline - time.monotonic()
    if left <= 0:
        raise _total_timeout()
    try:
        return exchange(min(timeout, left))
    except EvaluationError as exc:
        if exc.code is FailureCode.REQUEST_TIMEOUT and left < timeout:
            raise _total_timeout() from None
        raise


def decode_json(path: str, data: bytes) -> Any:
    """The decoded reply, or BAD_JSON (ValueError, UnicodeDecodeError, deep nesting...)."""
    try:
        return json.loads(data)
    except Exception:
        raise EvaluationError(FailureCode.BAD_JSON, f"POST {path} did not answer JSON") from None


def _total_timeout() -> EvaluationError:
    return EvaluationError(
        FailureCode.TOTAL_TIMEOUT, "the evaluation's wall-clock budget ran out during a request"
    )


def _in_order(futures: Sequence[Future[Prediction | None]]) -> list[Prediction]:
    """The predictions, or the failure of the earliest example that failed."""
    for future in futures:
        error = future.exception()
        if error is not None:
            raise error
    predictions: list[Prediction] = []
    for future in futures:
        prediction = future.result()
        if prediction is None:  # unreachable without a failure, which was raised above
            raise RuntimeError("a request was skipped although none failed")
        predictions.append(prediction)
    return predictions
