"""Live models for the dynamic loop: a writer's example goes to a running model, one at a time.

A ``LivePool`` keeps at most ``budget`` models running, started through the same runtime
factory as scoring (a docker model runs in the same sandbox), and stops the least recently
used to make room, or those idle longer than ``idle_s`` on the injected clock. ``answer``
never receives the intended label: it takes only the input fields, and the wire body is
built from them alone. Every failure is a ``LiveModelError`` whose message a writer can
read; the model is then stopped, and the next call starts it again.

Locks: one per model (two writers to one model are served in turn, and a model is never
stopped while it answers) and one for the pool's bookkeeping, never held while a model
starts, answers or stops. Only one model lock is held at a time, so they cannot deadlock.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from configs.schema import TaskSpec
from configs.vocabulary.clock import SYSTEM_CLOCK, Clock
from configs.vocabulary.examples import Example, Prediction
from configs.vocabulary.failures import FailureCode
from configs.vocabulary.runtimes import StoredRuntime
from evaluator.errors import EXIT_SYMPTOMS, EvaluationError
from evaluator.runtimes.factory import make_runtime
from evaluator.runtimes.runtime import Runtime
from evaluator.transport.client import ModelClient
from store.blobs import BlobStore

log = logging.getLogger(__name__)

StartRuntime = Callable[["LiveModel", TaskSpec], tuple[Runtime, ModelClient]]
_EXIT_WAIT_S = 0.2  # a dying model's exit is recorded a moment after its connection drops
_VARIANT = "live"  # keys the wire ids of live requests apart from any scoring pass


@dataclass(frozen=True)
class LiveModel:
    """A model to answer writers: ``runtime`` and ``image_id`` are its ``models`` row's columns."""

    model_id: str
    runtime: StoredRuntime
    image_id: str | None


class LiveModelError(Exception):
    """A live model could not answer: ``code`` is a FailureCode value, ``message`` a sentence
    for the writer."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(eq=False)
class _Slot:
    """One model's place in the pool. ``occupies``: it counts against the budget (running,
    or reserved by a caller about to start it); changed under the pool lock only."""

    model_id: str
    last_used: datetime
    lock: threading.Lock = field(default_factory=threading.Lock)
    occupies: bool = False
    runtime: Runtime | None = None
    client: ModelClient | None = None
    task: TaskSpec | None = None


class LivePool:
    """Running models answering one example at a time, within a budget of running models."""

    def __init__(
        self,
        blobs: BlobStore,
        *,
        budget: int = 2,
        idle_s: float = 300.0,
        clock: Clock = SYSTEM_CLOCK,
        start_runtime: StartRuntime | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        if budget < 1:
            raise ValueError(f"budget must be at least 1, not {budget}")
        self._blobs = blobs
        self._budget = budget
        self._idle = timedelta(seconds=idle_s)
        self._clock = clock
        self._start_runtime = start_runtime or self._start_default
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._slots: OrderedDict[str, _Slot] = OrderedDict()  # least recently used first
        self._closed = False
        self._closing = threading.Event()  # ends the reaper thread
        self._reaper: threading.Thread | None = None

    # -- public -----------------------------------------------------------------------------
    def answer(self, model: LiveModel, task: TaskSpec, inputs: Mapping[str, Any]) -> Prediction:
        """The model's validated answer to one example made of ``inputs`` (the task's input
        fields); starts the model if it is not running. LiveModelError on any failure."""
        slot, displaced = self._reserve(model.model_id)
        self._stop_all(displaced)
        victims: list[_Slot] = []
        try:
            with slot.lock:
                client, victims = self._ensure_started(slot, model, task)
                return self._ask(slot, client, inputs)
        finally:
            self._stop_all(victims)

    def stop_idle(self) -> int:
        """Stop the models unused for longer than ``idle_s``; returns how many were stopped."""
        cutoff = self._clock.now() - self._idle
        with self._lock:
            idle = [s for s in self._slots.values() if s.occupies and s.last_used <= cutoff]
            for slot in idle:
                slot.occupies = False
        return sum(self._stop_if_released(slot) for slot in idle)

    def stop_models(self, model_ids: Iterable[str]) -> list[str]:
        """Stop those of ``model_ids`` that run (a round closed, say); one answering a
        writer finishes first (it holds its model's lock). Returns the ids stopped."""
        wanted = set(model_ids)
        with self._lock:
            slots = [s for s in self._slots.values() if s.model_id in wanted]
            for slot in slots:
                slot.occupies = False
        return [slot.model_id for slot in slots if self._stop_if_released(slot)]

    def start_reaper(self, check_s: float = 30.0) -> None:
        """Stop idle models every ``check_s`` seconds in a daemon thread, until ``close``:
        a round nobody writes to does not keep its containers. Starting twice is a no-op."""
        with self._lock:
            if self._reaper is not None or self._closed:
                return
            self._reaper = threading.Thread(
                target=self._reap, args=(check_s,), name="live-reaper", daemon=True
            )
        self._reaper.start()

    def _reap(self, check_s: float) -> None:
        while not self._closing.wait(check_s):
            try:
                self.stop_idle()
            except Exception:  # the next pass tries again; the pool must not lose its reaper
                log.exception("stopping idle live models failed")

    def close(self) -> None:
        """Stop every model and the reaper; later calls to ``answer`` fail. Safe to call
        more than once."""
        self._closing.set()
        reaper = self._reaper
        if reaper is not None and reaper is not threading.current_thread():
            reaper.join(timeout=30)
        with self._lock:
            self._closed = True
            slots = list(self._slots.values())
            for slot in slots:
                slot.occupies = False
        for slot in slots:
            self._stop_if_released(slot)

    def warm(self) -> list[str]:
        """Ids of the models running now, least recently used first."""
        with self._lock:
            return [s.model_id for s in self._slots.values() if s.runtime is not None]

    # -- bookkeeping (pool lock) ------------------------------------------------------------
    def _reserve(self, model_id: str) -> tuple[_Slot, list[_Slot]]:
        """Mark ``model_id`` used now and give it a place in the budget: returns its slot and
        the least recently used models that must stop to make room."""
        with self._lock:
            if self._closed:
                raise LiveModelError(FailureCode.PLATFORM_ERROR.value, "live models are shut down")
            slot = self._slots.get(model_id)
            if slot is None:
                slot = self._slots[model_id] = _Slot(model_id, self._clock.now())
            slot.last_used = self._clock.now()
            self._slots.move_to_end(model_id)
            return slot, self._make_room(slot)

    def _make_room(self, slot: _Slot) -> list[_Slot]:
        """Count ``slot`` against the budget (pool lock held); returns the least recently
        used models it displaces, to be stopped once no lock is held."""
        if slot.occupies:
            return []
        slot.occupies = True
        others = [s for s in self._slots.values() if s.occupies and s is not slot]
        victims = others[: max(0, len(others) - (self._budget - 1))]
        for victim in victims:
            victim.occupies = False
        return victims

    def _stop_all(self, slots: list[_Slot]) -> None:
        for slot in slots:
            self._stop_if_released(slot)

    def _release(self, slot: _Slot) -> None:
        with self._lock:
            slot.occupies = False

    def _stop_if_released(self, slot: _Slot) -> bool:
        """Stop ``slot``'s model unless a caller took it back meanwhile; True if it stopped."""
        with slot.lock:
            with self._lock:
                if slot.occupies:
                    return False
            return self._stop(slot)

    # -- one model (its lock held) ----------------------------------------------------------
    def _ensure_started(
        self, slot: _Slot, model: LiveModel, task: TaskSpec
    ) -> tuple[ModelClient, list[_Slot]]:
        """The slot's client, starting the model if needed; also the models to stop for room
        (this one was displaced while its caller waited, so it takes its place again)."""
        if slot.client is not None and slot.task != task:  # a new version of the task
            self._stop(slot)
        if slot.client is not None:
            return slot.client, []
        with self._lock:
            if self._closed:  # close() ran while this caller waited for the model's lock
                raise LiveModelError(FailureCode.PLATFORM_ERROR.value, "live models are shut down")
            victims = self._make_room(slot)
        try:
            slot.runtime, slot.client = self._start_runtime(model, task)
        except BaseException as exc:
            with self._lock:  # nothing started: the displaced models keep their places
                slot.occupies = False
                for victim in victims:
                    victim.occupies = True
            raise self._explain(exc, None) from None
        slot.task = task
        return slot.client, victims

    def _ask(self, slot: _Slot, client: ModelClient, inputs: Mapping[str, Any]) -> Prediction:
        """One example made of ``inputs`` alone, with a fresh uid; on failure the model stops."""
        example = Example(uuid.uuid4().hex, dict(inputs), target="")  # target is never sent
        try:
            return client.predict([example], timeout=self._timeout_s, variant=_VARIANT)[0]
        except BaseException as exc:
            try:
                error = self._explain(exc, slot.runtime)  # asks the runtime before it stops
            finally:
                self._release(slot)
                self._stop(slot)
            raise error from None

    def _stop(self, slot: _Slot) -> bool:
        """Stop the slot's model if it runs; True if it did."""
        runtime, client = slot.runtime, slot.client
        slot.runtime = slot.client = slot.task = None
        if client is not None:
            client.close()
        if runtime is None:
            return False
        try:
            runtime.stop()
        except Exception:  # a stop that fails must not hide the answer's own outcome
            log.exception("stopping live model %s failed", slot.model_id)
        return True

    def _start_default(self, model: LiveModel, task: TaskSpec) -> tuple[Runtime, ModelClient]:
        """Start ``model`` as scoring does (same factory and sandbox) and wait until ready."""
        runtime = make_runtime(pinned_spec(model), task.limits, self._blobs)
        return runtime, start_ready(runtime, task)

    # -- errors -----------------------------------------------------------------------------
    def _explain(self, exc: BaseException, runtime: Runtime | None) -> LiveModelError:
        """The writer's sentence for ``exc``; a model that died says why it did."""
        if isinstance(exc, LiveModelError):
            return exc
        if isinstance(exc, EvaluationError):
            wait = exc.code is FailureCode.CRASHED  # a dropped connection: is it dying?
            died = _exit_sentence(runtime, wait) if exc.code in EXIT_SYMPTOMS else None
            if died is not None:
                return LiveModelError(FailureCode.CRASHED.value, died)
            return LiveModelError(exc.code.value, _sentence(exc, self._timeout_s))
        if isinstance(exc, OSError | ValueError):  # the command or the stored spec is unusable
            return LiveModelError(FailureCode.START_FAILED.value, "the model could not be started")
        if not isinstance(exc, Exception):
            raise exc  # KeyboardInterrupt and the like are not the model's doing
        log.exception("a live model failed on the platform side")
        return LiveModelError(
            FailureCode.PLATFORM_ERROR.value, "the model could not be asked (a platform fault)"
        )


def start_ready(runtime: Runtime, task: TaskSpec) -> ModelClient:
    """Start ``runtime`` and wait (within the task's start-up budget) until it answers; a
    model that never gets ready is stopped before the error goes up."""
    client: ModelClient | None = None
    try:
        client = ModelClient(runtime.start(), task, task.limits)
        client.wait_ready(task.limits.startup_s, runtime.alive)
    except BaseException:
        if client is not None:
            client.close()
        runtime.stop()
        raise
    return client


def pinned_spec(model: LiveModel) -> Mapping[str, Any]:
    """The row's runtime spec, an upload pinned to the image its scores came from."""
    spec = dict(model.runtime)
    if spec.get("kind") == "docker" and model.image_id and not spec.get("image_id"):
        spec["image_id"] = model.image_id
    return spec


def _exit_sentence(runtime: Runtime | None, wait: bool) -> str | None:
    """Why the model exited (e.g. "the model exited with code 1"), None while it runs."""
    if runtime is None:
        return None
    deadline = time.monotonic() + (_EXIT_WAIT_S if wait else 0.0)
    while runtime.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    if runtime.alive():
        return None
    try:
        reason = runtime.exit_reason()
    except Exception:  # the runtime's own account is a courtesy
        log.exception("a live model's runtime could not say why it stopped")
        reason = None
    return reason.sentence if reason else "the model stopped"


def _sentence(exc: EvaluationError, timeout_s: float) -> str:
    """A writer's sentence for a failure the model's runtime did not explain."""
    code = exc.code
    if code in (FailureCode.REQUEST_TIMEOUT, FailureCode.TOTAL_TIMEOUT):
        return f"the model did not answer within {timeout_s:g} s"
    if code is FailureCode.NEVER_HEALTHY:
        return f"the model did not start in time ({exc.message})"
    if code is FailureCode.CRASHED:
        return f"the model stopped answering ({exc.message[:200]})"
    if code in (FailureCode.START_FAILED, FailureCode.IMAGE_NOT_LOADABLE):
        return f"the model could not be started ({exc.message[:200]})"
    if code is FailureCode.LABEL_OUTSIDE_SET:
        return "the model answered with a label that is not one of the task's"
    if code is FailureCode.BAD_STATUS:
        return f"the model answered with an error ({exc.message[:200]})"
    return f"the model's answer could not be used ({exc.message[:200]})"
