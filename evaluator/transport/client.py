"""The HTTP model protocol client: batches, timeouts, and validation of every reply.

Speaks protocol v1 (``/health``, ``/predict`` with opaque per-request ids, never dataset
uids) and the Dynalab 2.0 dialect (``/model/batch_evaluation``, matched by position, or
``/model/single_evaluation``, one example per request: ``single_route``). Every failure
raises EvaluationError with a FailureCode; nothing is retried silently, no wait is
unbounded, and a request's time limit is a deadline for the whole exchange.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable, Sequence

from configs.schema import Limits, TaskSpec
from configs.vocabulary.examples import Example, Prediction
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.transport.channel import Channel
from evaluator.transport.deadlines import RequestDeadline
from evaluator.transport.encoding import dump_body
from evaluator.transport.endpoint import Endpoint
from evaluator.transport.replies import validate_predictions
from evaluator.transport.single_route import (
    FALLBACK_STATUSES,
    Route,
    SingleRoute,
    configured_concurrency,
    decode_json,
    route_from_openapi,
    timed,
)
from evaluator.transport.wire_ids import WireIds

__all__ = ["ModelClient", "validate_predictions"]

_POLL_S = 0.05


class ModelClient:
    """Keep-alive HTTP/1.1 connections to a started model: one, or up to ``concurrency``
    on the single-example route (default: ``single_route.configured_concurrency``, 1).

    ``salt`` keys the wire ids (random by default: one client serves one evaluation).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        task: TaskSpec,
        limits: Limits,
        *,
        salt: bytes | None = None,
        concurrency: int | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.dialect = endpoint.dialect
        self.task = task
        self.limits = limits
        self.concurrency = (
            concurrency if concurrency is not None else configured_concurrency(limits)
        )
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        self._channels = [self._new_channel()]
        self._wire_ids = WireIds(salt)
        self._route: Route | None = None  # learnt from /openapi.json or the batch route's 404
        self._single: SingleRoute | None = None

    def _new_channel(self) -> Channel:
        return Channel(self.endpoint.host, self.endpoint.port, self.limits.max_reply_bytes)

    # The main connection and its deadline thread, as the protocol tests inspect them.
    @property
    def _conn(self) -> http.client.HTTPConnection | None:
        return self._channels[0].conn

    @property
    def _deadline(self) -> RequestDeadline:
        return self._channels[0].deadline

    def close(self) -> None:
        """Drop the connections and stop their threads (all restart on the next call)."""
        if self._single is not None:
            self._single.close()
        for channel in self._channels:
            channel.close()

    def _request(
        self, method: str, path: str, body: bytes | None, timeout: float
    ) -> tuple[int, bytes]:
        """One exchange on the main connection, finished within ``timeout`` seconds."""
        return self._channels[0].request(method, path, body, timeout)

    @property
    def one_example_per_request(self) -> bool:
        """Whether the model takes one example per request (its throughput is then a
        single-stream figure, and profiling says so)."""
        return self._route is Route.SINGLE

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
                status, body = self._request("GET", probe.path, None, timeout)
            except EvaluationError:
                return False
            if status == 200 and probe.path == self.dialect.openapi_path:
                # The document that says the model is ready also says which routes it has.
                self._route = route_from_openapi(self.dialect, body)
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
        total_deadline: float | None = None,
    ) -> list[Prediction]:
        """Send one batch and return validated predictions (with dataset uids) in order.

        ``variant`` names the pass (original, a perturbation, a profiling batch): each pass
        sends the same example under a different opaque wire id. ``timeout`` bounds each
        request; ``total_deadline`` (time.monotonic) the whole call, which is many requests
        on the single-example route (a request it cuts is a ``total_timeout``).
        """
        timeout = self.limits.request_s if timeout is None else timeout
        if self._route is Route.SINGLE:
            return self._single_route().predict(examples, timeout, total_deadline)
        wire_ids: list[str] | None = None
        if self.dialect.uses_wire_ids:
            wire_ids = self._wire_ids.assign(variant, [e.uid for e in examples])
        path = self.dialect.predict_path
        payload = self.dialect.batch_payload(self.task.name, examples, wire_ids)
        status, data = timed(
            lambda seconds: self._request(
                "POST", path, dump_body(payload, self.task.image_fields), seconds
            ),
            timeout,
            total_deadline,
        )
        if status in FALLBACK_STATUSES and self._route is None and self.dialect.single_path:
            # No batch route, and no document saying there is one: the single route it is.
            self._route = Route.SINGLE
            return self._single_route().predict(examples, timeout, total_deadline)
        if status != 200:
            snippet = data[:200].decode("utf-8", "replace")
            raise EvaluationError(
                FailureCode.BAD_STATUS, f"POST {path} answered {status}: {snippet}"
            )
        self._route = Route.BATCH
        try:
            return self._read_reply(path, data, examples, wire_ids)
        except EvaluationError:
            raise
        except Exception as exc:  # a hostile reply must never pass for a platform fault
            raise EvaluationError(
                FailureCode.BAD_JSON, f"POST {path}: the reply could not be read ({exc!r:.200})"
            ) from None

    def _single_route(self) -> SingleRoute:
        if self._single is None:
            while len(self._channels) < self.concurrency:
                self._channels.append(self._new_channel())
            self._single = SingleRoute(self._channels, self.dialect, self.task)
        return self._single

    def _read_reply(
        self, path: str, data: bytes, examples: Sequence[Example], wire_ids: list[str] | None
    ) -> list[Prediction]:
        items = self.dialect.reply_items(decode_json(path, data))
        return validate_predictions(
            self.task, examples, items, wire_ids, fold_case=self.dialect.fold_label_case
        )
