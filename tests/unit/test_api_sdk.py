"""The SDK's ``wait`` says when it gave up instead of returning a non-final submission."""

from __future__ import annotations

from typing import Any

import pytest

from client.sdk import DynaevalClient, WaitTimeout, job_status, wait_until_final


def submission(status: str) -> dict[str, Any]:
    return {"id": "m1", "job": {"status": status, "stage": status}}


def test_wait_returns_the_final_submission() -> None:
    states = iter(["queued", "running", "done"])
    found = wait_until_final(lambda: submission(next(states)), timeout=5, poll=0.01)
    assert job_status(found) == "done"


def test_wait_raises_a_timeout_error_carrying_the_last_state() -> None:
    with pytest.raises(TimeoutError) as caught:
        wait_until_final(lambda: submission("running"), timeout=0.05, poll=0.01)
    assert isinstance(caught.value, WaitTimeout)
    assert caught.value.submission["job"]["status"] == "running"
    assert "m1" in str(caught.value) and "running" in str(caught.value)


def test_client_wait_uses_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    client = DynaevalClient("http://127.0.0.1:9")
    monkeypatch.setattr(client, "submission", lambda model_id: submission("queued"))
    with pytest.raises(WaitTimeout):
        client.wait("m1", timeout=0.05, poll=0.01)
    monkeypatch.setattr(client, "submission", lambda model_id: submission("failed"))
    assert job_status(client.wait("m1", timeout=0.05, poll=0.01)) == "failed"
