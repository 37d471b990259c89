"""Protocol dialects: how a model is asked whether it is ready and how a batch is sent and
read back. One registry; a spec or a CLI flag names a dialect, the code never compares
dialect names.

* ``v1`` (MODEL_PROTOCOL.md): ``GET /health``; ``POST /predict`` with the task name and
  instances under opaque per-request wire ids; the reply is ``{"predictions": [...]}``.
* ``dynalab2`` (Dynabench's Dynalab 2.0 containers): ready when ``GET /openapi.json``
  answers 200 or ``GET /`` answers at all; ``POST /model/batch_evaluation`` with
  ``{"dataset_samples": [...]}``; the reply is a list matched by position (no ids). A model
  that serves only ``POST /model/single_evaluation`` (Dynabench's published templates) gets
  one flat ``{field: value}`` object per request and answers one object
  (``evaluator.transport.single_route``). Labels that differ from the task's only in letter
  case are accepted.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from configs.vocabulary.examples import Example
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.registry import Registry
from evaluator.errors import EvaluationError


@dataclass(frozen=True)
class Probe:
    """A readiness request: ``path`` is ready on 200, or on any HTTP answer if ``any_status``."""

    path: str
    any_status: bool = False


class Dialect(abc.ABC):
    """One way of talking to a model server."""

    name: str
    default_port: int
    probes: tuple[Probe, ...]
    predict_path: str
    uses_wire_ids: bool  # whether answers are matched by id (else by position)
    # A route taking one example per request, used when the batch route is missing.
    single_path: str | None = None
    # Where the model describes its routes (read when it answers a readiness probe).
    openapi_path: str | None = None
    fold_label_case: bool = False  # whether "Entailed" may stand for the task's "entailed"

    @abc.abstractmethod
    def batch_payload(
        self, task: str, examples: Sequence[Example], wire_ids: Sequence[str] | None
    ) -> Any:
        """The JSON body of one batch request: input fields only, never labels."""

    @abc.abstractmethod
    def reply_items(self, reply: Any) -> list[Any]:
        """The per-example answers in a decoded reply (EvaluationError if its shape is wrong)."""

    def single_payload(self, example: Example) -> Any:
        """The JSON body of one single-example request: input fields only, never labels."""
        raise NotImplementedError(f"{self.name} has no single-example route")

    def single_item(self, reply: Any) -> Any:
        """The answer in a decoded single-example reply (EvaluationError if its shape is wrong)."""
        raise NotImplementedError(f"{self.name} has no single-example route")

    def __repr__(self) -> str:
        return f"<dialect {self.name}>"


class ProtocolV1(Dialect):
    name = "v1"
    default_port = 8080
    probes = (Probe("/health"),)
    predict_path = "/predict"
    uses_wire_ids = True

    def batch_payload(
        self, task: str, examples: Sequence[Example], wire_ids: Sequence[str] | None
    ) -> Any:
        if wire_ids is None:
            raise ValueError("protocol v1 sends every instance under a wire id")
        instances = [e.request_instance(w) for e, w in zip(examples, wire_ids, strict=True)]
        return {"task": task, "instances": instances}

    def reply_items(self, reply: Any) -> list[Any]:
        if not isinstance(reply, dict) or not isinstance(reply.get("predictions"), list):
            raise EvaluationError(FailureCode.BAD_JSON, 'reply must be {"predictions": [...]}')
        predictions: list[Any] = reply["predictions"]
        return predictions


class Dynalab2(Dialect):
    name = "dynalab2"
    default_port = 80
    probes = (Probe("/openapi.json"), Probe("/", any_status=True))
    predict_path = "/model/batch_evaluation"
    uses_wire_ids = False
    single_path = "/model/single_evaluation"
    openapi_path = "/openapi.json"
    fold_label_case = True

    def batch_payload(
        self, task: str, examples: Sequence[Example], wire_ids: Sequence[str] | None
    ) -> Any:
        return {"dataset_samples": [dict(e.inputs) for e in examples]}

    def reply_items(self, reply: Any) -> list[Any]:
        if not isinstance(reply, list):
            raise EvaluationError(FailureCode.BAD_JSON, "batch_evaluation must answer a list")
        return reply

    def single_payload(self, example: Example) -> Any:
        # Flat, as Dynabench's ModelSingleInput schemas declare ({"context", "hypothesis"}).
        return dict(example.inputs)

    def single_item(self, reply: Any) -> Any:
        if not isinstance(reply, dict):
            raise EvaluationError(FailureCode.BAD_JSON, "single_evaluation must answer an object")
        return reply


DIALECTS: Registry[Dialect] = Registry("protocol")
for _dialect in (ProtocolV1(), Dynalab2()):
    DIALECTS.add(_dialect.name, _dialect)
DEFAULT_DIALECT = ProtocolV1.name


def dialect_choices() -> list[str]:
    """Dialect names for a flag or a schema, the default first."""
    return [DEFAULT_DIALECT, *(name for name in DIALECTS.names() if name != DEFAULT_DIALECT)]


def get_dialect(name: str) -> Dialect:
    """The dialect called ``name`` (UnknownName, a ValueError, with a suggestion otherwise)."""
    return DIALECTS.get(name)
