"""moto's S3 server on a free loopback port for the tests: started once per session as a
subprocess, with one bucket, killed (its process group) when the session ends.

Every S3 call of the tests goes to this server: the fixtures give explicit endpoint and dummy
credentials, and ``isolated_aws_env`` clears what could lead boto3 elsewhere (profiles,
shared config files, real keys). Without moto's server the tests that need it skip locally
and fail in CI (see ``conftest.skip_or_fail``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from configs.settings import S3Options
from evaluator.runtimes.process import free_port

BUCKET = "dynaeval-test"
REGION = "us-east-1"
START_TIMEOUT_S = 30.0
DUMMY_KEY_ID = "testing-key-id"
DUMMY_SECRET = "testing-secret-never-printed"
# Variables that could point boto3 at real AWS or at the developer's own set-up.
AWS_VARS = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_REGION",
)


def moto_server_available() -> bool:
    try:
        return importlib.util.find_spec("moto.server") is not None
    except ModuleNotFoundError:  # moto itself is absent
        return False


@dataclass(frozen=True)
class MotoServer:
    """A running moto server: its endpoint and the bucket made for the tests."""

    endpoint_url: str
    bucket: str = BUCKET

    def options(self) -> S3Options:
        return S3Options(
            endpoint_url=self.endpoint_url,
            region=REGION,
            access_key_id=DUMMY_KEY_ID,
            secret_access_key=DUMMY_SECRET,
        )

    def client(self) -> Any:
        """One S3 client for the session (building one reads botocore's models: ~0.5 s)."""
        return _client(self)

    def env(self, home: Path) -> dict[str, str]:
        """Environment variables that send boto3 here, and only here."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": DUMMY_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": DUMMY_SECRET,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_CONFIG_FILE": str(home / "aws-config-absent"),
            "AWS_SHARED_CREDENTIALS_FILE": str(home / "aws-credentials-absent"),
            "AWS_EC2_METADATA_DISABLED": "true",
            # a proxy of the developer's must not relay loopback traffic
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }


def isolated_aws_env(server: MotoServer, home: Path) -> dict[str, str]:
    """``os.environ`` without the AWS variables of the developer, plus ``server.env``."""
    env = {k: v for k, v in os.environ.items() if k not in AWS_VARS}
    return {**env, **server.env(home)}


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _answers(url: str) -> bool:
    try:
        with _DIRECT.open(f"{url}/moto-api/", timeout=1):
            return True
    except urllib.error.HTTPError:
        return True  # it answered, even if with an error
    except OSError:
        return False


def _wait(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto's server exited {proc.returncode}: {log.read_text()[-2000:]}")
        if _answers(url):
            return
        time.sleep(0.05)
    raise RuntimeError(f"moto's server did not answer within {START_TIMEOUT_S} s")


@functools.cache
def _client(server: MotoServer) -> Any:
    from store.s3 import make_client

    with mock.patch.dict(os.environ, isolated_aws_env(server, Path("/nonexistent")), clear=True):
        return make_client(server.options())  # no profile or config file of the developer's


@contextlib.contextmanager
def running_moto_server(root: Path) -> Iterator[MotoServer]:
    """Start ``python -m moto.server`` on 127.0.0.1 with a bucket; kill it on exit."""
    port = free_port()
    server = MotoServer(f"http://127.0.0.1:{port}")
    log = root / "moto.log"
    env = isolated_aws_env(server, root)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait(proc, server.endpoint_url, log)
        server.client().create_bucket(Bucket=server.bucket)
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
