"""Structured logs: one JSON object per line with the context fields, and no bearer token
or session cookie in any format."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from configs.logsetup import MASK, configure_logging, mask_secrets

SECRET = "dyn_s3cr3t-T0ken_value"


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


@pytest.mark.usefixtures("restore_root")
def test_json_lines_carry_the_context() -> None:
    stream = io.StringIO()
    configure_logging("json", verbose=True, stream=stream)
    log = logging.getLogger("worker.worker")
    log.info("job %s done", "j-1", extra={"job_id": "j-1", "worker_id": "w-1"})
    log.warning("plain")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed", extra={"request_id": "r-9"})
    first, second, third = (json.loads(line) for line in lines(stream))
    assert first["message"] == "job j-1 done" and first["level"] == "INFO"
    assert first["logger"] == "worker.worker" and first["time"].endswith("+00:00")
    assert first["job_id"] == "j-1" and first["worker_id"] == "w-1"
    assert "job_id" not in second
    assert third["request_id"] == "r-9" and "ValueError: boom" in third["exception"]


@pytest.mark.usefixtures("restore_root")
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_tokens_and_cookies_are_masked(log_format: str) -> None:
    stream = io.StringIO()
    configure_logging(log_format, stream=stream)
    log = logging.getLogger("api.auth")
    log.warning("header Authorization: Bearer %s from %s", SECRET, "127.0.0.1")
    log.warning("cookie dynaeval_session=%s; theme=dark", SECRET)
    log.warning("lower-case bearer %s", SECRET)
    output = stream.getvalue()
    assert SECRET not in output
    assert output.count(MASK) == 3 and "127.0.0.1" in output and "theme=dark" in output
    if log_format == "json":
        assert all(json.loads(line)["logger"] == "api.auth" for line in lines(stream))


@pytest.mark.usefixtures("restore_root")
def test_text_stays_the_default_and_quiet() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    logging.getLogger("x").info("not shown without -v")
    logging.getLogger("x").warning("shown")
    assert lines(stream) == [lines(stream)[0]] and lines(stream)[0].endswith("WARNING x: shown")


@pytest.mark.usefixtures("restore_root")
def test_a_service_logs_its_jobs_without_being_asked() -> None:
    """docs/operating.md says a worker logs each job it claims, finishes, fails, hands back
    or recovers; without -v it logged none of them (outside tester)."""
    stream = io.StringIO()
    configure_logging(stream=stream, service=True)
    logging.getLogger("worker.worker").info("worker w claimed job j")
    logging.getLogger("store.jobs").info("not a job's lifecycle")
    assert [line.split(" ", 2)[2] for line in lines(stream)] == [
        "INFO worker.worker: worker w claimed job j"
    ]
    configure_logging(stream=stream)  # a one-off command stays quiet
    logging.getLogger("worker.worker").info("not shown")
    assert "not shown" not in stream.getvalue()


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown log format"):
        configure_logging("xml")


def test_mask_secrets_leaves_other_text() -> None:
    assert mask_secrets("no secrets here") == "no secrets here"
    assert mask_secrets('"Authorization": "Bearer abc"') == f'"Authorization": "Bearer {MASK}"'
