"""The registry is checked again when the worker pulls: its name is resolved (a fake
resolver here, no network) and a loopback, private, link-local or metadata answer fails the
job as the submitter's ``image_not_loadable`` before the engine is asked, unless the
operator allow-listed the registry."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from configs.schema import Limits
from configs.vocabulary.failures import FailureCode
from evaluator.errors import EvaluationError
from evaluator.runtimes.docker import images, references
from evaluator.runtimes.docker.references import check_pull_address
from evaluator.runtimes.factory import make_runtime
from store.blobs import LocalBlobStore

REFERENCE = "registry.example.org/team/model:1"


class EngineReached(Exception):
    """Raised by the fake engine: the pull got past the registry check."""


class FakeEngine:
    """A Docker client stand-in that records whether anything asked it."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.images = self

    def get_registry_data(self, reference: str) -> Any:
        self.asked.append(reference)
        raise EngineReached(reference)


def resolver(*answers: str) -> Any:
    asked: list[tuple[str, int | None]] = []

    def resolve(host: str, port: int | None) -> list[str]:
        asked.append((host, port))
        return list(answers)

    resolve.asked = asked  # type: ignore[attr-defined]
    return resolve


def failing_resolver(errno: int) -> Any:
    def resolve(host: str, port: int | None) -> list[str]:
        raise socket.gaierror(errno, "resolver says no")

    return resolve


def _pull(reference: str, resolve: Any, allowed: list[str] | None = None) -> FakeEngine:
    engine = FakeEngine()
    images.acquire_pull(reference, Limits(), engine, allowed=allowed or [], resolve=resolve)  # type: ignore[arg-type]
    return engine


@pytest.mark.parametrize(
    "answer",
    [
        "10.0.0.5",
        "127.0.0.1",
        "169.254.169.254",
        "192.168.1.20",
        "::1",
        "fe80::1%eth0",
        "::ffff:169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
    ],
)
def test_a_name_that_now_resolves_inside_is_refused_before_the_engine(answer: str) -> None:
    engine = FakeEngine()
    with pytest.raises(EvaluationError) as caught:
        images.acquire_pull(REFERENCE, Limits(), engine, allowed=[], resolve=resolver(answer))  # type: ignore[arg-type]
    assert caught.value.code is FailureCode.IMAGE_NOT_LOADABLE
    assert caught.value.code.user_caused  # the submitter's, never retried
    assert "registry.example.org" in caught.value.message and answer in caught.value.message
    assert engine.asked == []


def test_one_private_answer_among_public_ones_is_enough_to_refuse() -> None:
    with pytest.raises(ValueError, match="10.1.2.3"):
        check_pull_address(REFERENCE, (), resolver("93.184.216.34", "10.1.2.3"))


def test_a_public_answer_reaches_the_engine() -> None:
    resolve = resolver("93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946")
    with pytest.raises(EngineReached):
        _pull("registry.example.org:5000/team/model:1", resolve)
    assert resolve.asked == [("registry.example.org", 5000)]


def test_an_allow_listed_registry_is_pulled_without_resolving() -> None:
    resolve = resolver("10.0.0.5")
    with pytest.raises(EngineReached):
        _pull("registry.lan:5000/team/model:1", resolve, allowed=["registry.lan:5000"])
    with pytest.raises(EngineReached):
        _pull("10.0.0.5:5000/team/model:1", resolve, allowed=["10.0.0.5"])
    assert resolve.asked == []


def test_the_allow_list_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DYNAEVAL_ALLOWED_REGISTRIES", "other.lan, registry.lan:5000")
    engine = FakeEngine()
    with pytest.raises(EngineReached):
        images.acquire_pull("registry.lan:5000/m:1", Limits(), engine, resolve=resolver("10.0.0.5"))  # type: ignore[arg-type]
    monkeypatch.delenv("DYNAEVAL_ALLOWED_REGISTRIES")
    with pytest.raises(EvaluationError):
        images.acquire_pull("registry.lan:5000/m:1", Limits(), engine, resolve=resolver("10.0.0.5"))  # type: ignore[arg-type]


def test_the_process_can_extend_the_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve --allow-registry`` entries reach the embedded workers' pulls."""
    monkeypatch.delenv("DYNAEVAL_ALLOWED_REGISTRIES", raising=False)
    monkeypatch.setattr(references, "_PROCESS_ALLOWED", set())
    engine = FakeEngine()
    references.allow_registries_for_pulls(["registry.lan:5000", " "])
    with pytest.raises(EngineReached):
        images.acquire_pull("registry.lan:5000/m:1", Limits(), engine, resolve=resolver("10.0.0.5"))  # type: ignore[arg-type]
    assert references.pull_allow_list() == ["registry.lan:5000"]


def test_docker_hub_references_are_not_resolved() -> None:
    resolve = resolver("10.0.0.5")
    with pytest.raises(EngineReached):
        _pull("team/model:1", resolve)
    assert resolve.asked == []


def test_an_unknown_name_is_the_submitters_and_a_resolver_outage_the_platforms() -> None:
    with pytest.raises(EvaluationError) as unknown:
        _pull(REFERENCE, failing_resolver(socket.EAI_NONAME))
    assert unknown.value.code is FailureCode.IMAGE_NOT_LOADABLE
    assert "does not resolve" in unknown.value.message
    with pytest.raises(EvaluationError) as outage:
        _pull(REFERENCE, failing_resolver(socket.EAI_AGAIN))
    assert outage.value.code is FailureCode.PLATFORM_ERROR  # retried, never charged
    with pytest.raises(EvaluationError) as empty:
        _pull(REFERENCE, resolver())
    assert empty.value.code is FailureCode.IMAGE_NOT_LOADABLE


def test_local_names_and_literals_are_still_refused_at_pull_time() -> None:
    """A row stored before the submit-time check (or by the trusted CLI) is checked too."""
    for reference in ("localhost:5000/m:1", "registry.internal/m:1", "169.254.169.254/m:1"):
        with pytest.raises(EvaluationError) as caught:
            _pull(reference, resolver("93.184.216.34"))
        assert caught.value.code is FailureCode.IMAGE_NOT_LOADABLE


def test_the_workers_runtime_factory_checks_before_pulling(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's path (a stored registry spec) refuses an address literal with no DNS."""
    monkeypatch.delenv("DYNAEVAL_ALLOWED_REGISTRIES", raising=False)
    spec = {"kind": "docker", "source": "registry", "image": "10.0.0.5:5000/m:1"}
    with pytest.raises(EvaluationError) as caught:
        make_runtime(spec, Limits(), LocalBlobStore(tmp_path))
    assert caught.value.code is FailureCode.IMAGE_NOT_LOADABLE
    assert "refused to pull" in caught.value.message
