"""The production deployment (deploy/docker-compose.yml) as containers, with faults.

The stack (PostgreSQL, moto's S3, the API on waitress, two workers) comes up under a
project name of its own, an admin token is made inside the API container, a handful of
``docker save`` tarballs of an example model are submitted through the published API
(127.0.0.1 only), and then, while they run: one worker is killed, the other is cut off its
network for a while, PostgreSQL restarts, the killed worker starts again. Every job must
end ``done`` exactly once with its results, and no sandbox of this stack may be left.

Images come from scripts/setup.sh (scripts/build-deploy-images.sh, cached by content); the
time bound is for the test itself. Only what this test creates is touched: its compose
project (containers, network, volume) and the sandboxes its workers label with their ids.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from evaluator.runtimes.process import free_port
from tests.conftest import skip_or_fail

# The bound covers a rebuild of the app image when the sources changed since setup (minutes
# on a loaded machine); the stack's own part is held to STACK_BUDGET_S below.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "deploy" / "docker-compose.yml"
BUILD_SCRIPT = REPO / "scripts" / "build-deploy-images.sh"
MODEL_IMAGE = "dynaeval-example/cpu_1ms:latest"
GUARD_IMAGE = "dynaeval/python-base:latest"
TASK = "sentiment"
MODELS = 3  # two run through the faults, one waits in the queue meanwhile
WORKERS = ("worker1", "worker2")
UP_TIMEOUT_S = 120.0
JOBS_TIMEOUT_S = 200.0
STACK_BUDGET_S = 360.0  # up, submit, faults, every job done, down
CUT_OFF_S = 20.0  # worker2 off its network: longer than a few heartbeats, shorter than a lease


def _run(command: list[str], timeout: float = 120.0, **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)


def _docker(*args: str, timeout: float = 60.0) -> str:
    result = _run(["docker", *args], timeout=timeout)
    assert result.returncode == 0, f"docker {' '.join(args)}: {result.stderr[-1000:]}"
    return result.stdout


def _wait(condition: Any, timeout_s: float, what: str, poll_s: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


@dataclass
class Stack:
    """One compose project of deploy/docker-compose.yml."""

    project: str
    env: dict[str, str]
    port: int
    token: str = ""
    owners: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    phases: dict[str, float] = field(default_factory=dict)

    def phase(self, name: str) -> None:
        """Note the time since the stack started (printed at the end)."""
        self.phases[name] = round(time.monotonic() - self.started, 1)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v1"

    def compose(self, *args: str, timeout: float = 120.0, check: bool = True, **kw: Any) -> str:
        command = ["docker-compose", "-f", str(COMPOSE_FILE), "-p", self.project, *args]
        result = _run(command, timeout=timeout, env=self.env, **kw)
        if check:
            assert result.returncode == 0, f"{' '.join(args)}: {result.stderr[-2000:]}"
        return result.stdout

    def container(self, service: str) -> str:
        """The full id of ``service``'s container (stopped ones included)."""
        found = self.compose("ps", "-a", "-q", service).split()
        assert len(found) == 1, f"{service}: containers {found}"
        return found[0]

    def network(self) -> str:
        return f"{self.project}_backend"

    def sql(self, query: str) -> list[list[str]]:
        """Rows of ``query`` run by psql in the postgres container (tab-separated, no header)."""
        out = self.compose(
            "exec", "-T", "postgres", "psql", "-U", "dynaeval", "-d", "dynaeval",
            "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", query,
        )  # fmt: skip
        return [line.split("\t") for line in out.splitlines() if line]

    def api(self, method: str, path: str, timeout: float = 60, **kwargs: Any) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return requests.request(
            method, self.base + path, headers=headers, timeout=timeout, **kwargs
        )

    def worker_ids(self) -> list[str]:
        """The workers' ids (``<hostname>-<name>``; the hostname is the container's short id,
        kept across restarts), which label every sandbox they start (``dynaeval.owner``).
        Remembered, so leftovers can be found after ``down`` too."""
        if not self.owners:
            self.owners = [f"{self.container(name)[:12]}-{name}" for name in WORKERS]
        return self.owners

    def sandboxes(self, running_only: bool = True) -> list[str]:
        """Containers the workers of this stack started (models and guards)."""
        found: list[str] = []
        for owner in self.worker_ids():
            args = ["ps", "-q", "--filter", "label=dynaeval.managed=1"]
            args += ["--filter", f"label=dynaeval.owner={owner}"]
            found += _docker(*args, *([] if running_only else ["-a"])).split()
        return found

    def remove_sandboxes(self) -> None:
        """Remove whatever sandbox containers and networks this stack's workers left."""
        with contextlib.suppress(AssertionError, subprocess.SubprocessError):
            owners = self.worker_ids()
            for owner in owners:
                selector = ["--filter", "label=dynaeval.managed=1"]
                selector += ["--filter", f"label=dynaeval.owner={owner}"]
                ids = _docker("ps", "-aq", *selector).split()
                if ids:
                    _run(["docker", "rm", "-f", "-v", *ids])
                nets = _docker("network", "ls", "-q", *selector).split()
                if nets:
                    _run(["docker", "network", "rm", *nets])


def _images() -> tuple[str, str]:
    """The app and postgres tags (built by setup; this call is cheap when they exist)."""
    if shutil.which("docker-compose") is None:
        skip_or_fail("docker-compose is not installed (scripts/setup.sh installs it)")
    if _run(["docker", "info"], timeout=30).returncode != 0:
        skip_or_fail("no Docker engine answers")
    for image in (GUARD_IMAGE, MODEL_IMAGE):
        if _run(["docker", "image", "inspect", image], timeout=30).returncode != 0:
            skip_or_fail(f"{image} is missing (scripts/setup.sh builds it)")
    result = _run([str(BUILD_SCRIPT)], timeout=1200)
    if result.returncode != 0:
        skip_or_fail(f"the deployment images cannot be built: {result.stderr[-800:]}")
    tags = result.stdout.split()
    app = next(t for t in tags if t.startswith("dynaeval/app:"))
    pg = next(t for t in tags if t.startswith("dynaeval/postgres:"))
    return app, pg


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    app, pg = _images()
    port = free_port()
    env = {
        **os.environ,
        "DYNAEVAL_PG_PASSWORD": secrets.token_hex(16),
        "DYNAEVAL_SECRET_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "DYNAEVAL_API_PORT": str(port),
        "DYNAEVAL_APP_IMAGE": app,
        "DYNAEVAL_POSTGRES_IMAGE": pg,
    }
    stack = Stack(f"dynaevaltest{os.getpid()}x{secrets.token_hex(3)}", env, port)
    try:
        stack.compose("up", "-d", "--no-build", timeout=UP_TIMEOUT_S + 60)
        _wait(lambda: _healthy(stack), UP_TIMEOUT_S, "the API to answer")
        stack.worker_ids()
        stack.phase("up")
        yield stack
    finally:
        with contextlib.suppress(Exception):
            logs = stack.compose("logs", "--no-color", "--tail", "60", check=False, timeout=60)
            (tmp_path / "compose.log").write_text(logs)
            print(logs[-12000:])  # shown by pytest when the test failed
        stack.compose("down", "-v", "--remove-orphans", "-t", "10", check=False, timeout=180)
        stack.remove_sandboxes()
        stack.phase("down")
        print(f"compose test phases (s since start): {stack.phases}")
        assert stack.phases["down"] < STACK_BUDGET_S, stack.phases


def _healthy(stack: Stack) -> bool:
    with contextlib.suppress(requests.RequestException):
        return stack.api("GET", "/tasks").status_code == 200
    return False


def _admin_token(stack: Stack) -> str:
    stack.compose(
        "exec", "-T", "api", "dynaeval", "users", "add", "admin", "--admin", "--no-password"
    )
    out = stack.compose(
        "exec", "-T", "api", "dynaeval", "tokens", "create", "deploy-test", "--user", "admin",
        "--scope", "read", "--scope", "submit", "--scope", "admin", "--json",
    )  # fmt: skip
    return str(json.loads(out)["token"])


def _submit(stack: Stack, tarball: Path, name: str) -> str:
    with tarball.open("rb") as handle:
        reply = stack.api(
            "POST",
            f"/tasks/{TASK}/submissions",
            data={"name": name, "protocol": "v1"},
            files={"image": (tarball.name, handle)},
            timeout=180,
        )
    assert reply.status_code == 201, reply.text[:500]
    return str(reply.json()["id"])


def _jobs(stack: Stack) -> dict[str, str]:
    """``{model id: job status}`` from the database."""
    return dict((row[0], row[1]) for row in stack.sql("SELECT model_id, status FROM jobs"))


def test_stack_survives_worker_kill_network_cut_and_database_restart(
    stack: Stack, tmp_path: Path
) -> None:
    stack.token = _admin_token(stack)
    assert stack.api("GET", "/me").json()["role"] == "admin"

    # gzip: a third of the plain tarball's 180 MB to upload, scan and store, per submission.
    tarball = tmp_path / "cpu_1ms.tar.gz"
    with (
        subprocess.Popen(["docker", "save", MODEL_IMAGE], stdout=subprocess.PIPE) as save,
        tarball.open("wb") as out,
    ):
        subprocess.run(["gzip", "-1"], stdin=save.stdout, stdout=out, check=True, timeout=120)
    assert save.returncode == 0
    with ThreadPoolExecutor(2) as pool:
        ids = list(pool.map(lambda i: _submit(stack, tarball, f"cpu-1ms-{i}"), range(MODELS)))
    tarball.unlink()
    stack.phase("submitted")

    # Faults while jobs run: wait until both workers hold one.
    def both_running() -> bool:
        rows = stack.sql("SELECT lease_owner FROM jobs WHERE status = 'running'")
        return len({row[0] for row in rows}) >= 2

    _wait(both_running, 90, "both workers to run a job")
    stack.phase("both running")
    # The sandboxes carry their worker's id: the check for leftovers below sees them.
    _wait(stack.sandboxes, 30, "the running jobs' sandboxes to show")
    worker1, worker2 = stack.container("worker1"), stack.container("worker2")
    _docker("kill", worker1)
    _docker("network", "disconnect", stack.network(), worker2)
    try:
        time.sleep(CUT_OFF_S / 2)
        stack.compose("restart", "-t", "10", "postgres", timeout=90)
        time.sleep(CUT_OFF_S / 2)
    finally:
        _docker("network", "connect", stack.network(), worker2)
    _docker("start", worker1)
    stack.phase("faults done")

    def all_final() -> bool:
        jobs = _jobs(stack)
        return len(jobs) == MODELS and all(s in ("done", "failed") for s in jobs.values())

    _wait(all_final, JOBS_TIMEOUT_S, "every job to end", poll_s=2)
    stack.phase("jobs final")

    attempts = stack.sql(
        "SELECT a.job_id, a.attempt, a.worker, coalesce(a.outcome, '-'), "
        "coalesce(a.failure_code, '-') FROM job_attempts a ORDER BY a.job_id, a.attempt"
    )
    print("attempts:", *("  ".join(row) for row in attempts), sep="\n")

    # Through the API: every submission done, with its results.
    for model_id in ids:
        found = stack.api("GET", f"/submissions/{model_id}").json()
        job = found["job"]
        assert job["status"] == "done", json.dumps(job)[:2000]
        results = found.get("results") or {}
        assert results.get("performance") is not None, json.dumps(found)[:2000]

    # In the database: one finished attempt, one result and one set of scores per job.
    done_attempts = stack.sql(
        "SELECT j.model_id, count(a.id) FROM jobs j LEFT JOIN job_attempts a "
        "ON a.job_id = j.id AND a.outcome = 'done' GROUP BY j.model_id"
    )
    assert sorted(done_attempts) == sorted([model_id, "1"] for model_id in ids)
    result_rows = stack.sql("SELECT model_id, count(*) FROM results GROUP BY model_id")
    assert sorted(result_rows) == sorted([model_id, "1"] for model_id in ids)
    score_jobs = stack.sql("SELECT model_id, count(DISTINCT job_id) FROM scores GROUP BY model_id")
    assert sorted(score_jobs) == sorted([model_id, "1"] for model_id in ids)
    # The same image scored on the same data: a score written twice would show as a count
    # out of line with the others.
    score_counts = stack.sql("SELECT model_id, count(*) FROM scores GROUP BY model_id")
    assert len(score_counts) == MODELS and len({count for _, count in score_counts}) == 1

    # Nothing left running: no model, no guard of this stack's workers.
    _wait(lambda: not stack.sandboxes(), 30, "the sandboxes to go", poll_s=1)
    stack.phase("checked")
