"""Docker errors are charged to the submission only when retrying cannot help."""

from __future__ import annotations

import pytest
import requests
from docker.errors import APIError, DockerException, ImageNotFound

from configs.vocabulary.failures import FailureCode
from evaluator.runtimes.docker.engine_faults import classify, is_platform_fault


def api_error(status: int, explanation: str) -> APIError:
    response = requests.Response()
    response.status_code = status
    return APIError(f"{status} error", response=response, explanation=explanation)


@pytest.mark.parametrize(
    ("error", "platform"),
    [
        (api_error(500, 'Get "http://127.0.0.1:5999/v2/": connection refused'), True),
        (api_error(500, "could not find an available, non-overlapping IPv4 address pool"), True),
        (api_error(503, "engine busy"), True),
        (DockerException("Error while fetching server API version: connection refused"), True),
        (ConnectionResetError("connection reset by peer"), True),
        # a DNS failure while pulling was charged as image_not_loadable
        (
            api_error(500, 'Get "https://r.example/v2/": dial tcp: lookup r.example: no such host'),
            True,
        ),
        (api_error(404, "lookup r.example on 127.0.0.11:53: server misbehaving: not found"), True),
        (api_error(500, "Temporary failure in name resolution"), True),
        (api_error(404, "manifest for team/model:1 not found: manifest unknown"), False),
        (api_error(500, "manifest unknown: manifest unknown"), False),
        (ImageNotFound("No such image: sha256:abc", response=requests.Response()), False),
        (api_error(400, "No command specified"), False),
        (ValueError("not a docker error"), False),
    ],
)
def test_whose_fault(error: Exception, platform: bool) -> None:
    assert is_platform_fault(error) is platform


def test_classify_keeps_the_users_code_for_user_faults() -> None:
    user = classify(api_error(404, "manifest unknown"), FailureCode.IMAGE_NOT_LOADABLE, "pulling")
    assert user.code == FailureCode.IMAGE_NOT_LOADABLE and user.code.user_caused
    platform = classify(api_error(502, "bad gateway"), FailureCode.IMAGE_NOT_LOADABLE, "pulling")
    assert platform.code == FailureCode.PLATFORM_ERROR and not platform.code.user_caused
    assert "retried" in platform.message
