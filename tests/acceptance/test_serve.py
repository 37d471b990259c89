"""``dynaeval serve`` as a subprocess: it listens at once, then scores every example model
(as local processes, and as sandboxed containers where a Docker engine answers), shows them
queued and running meanwhile, fills every leaderboard, and exits cleanly on SIGINT."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.acceptance.conftest import REPO, dynaeval_command, free_port

UP_S = 60.0
ALL_DONE_S = 240.0


def get(base: str, path: str, token: str | None = None) -> Any:
    request = urllib.request.Request(base + path)  # noqa: S310 - loopback
    if token:  # the local admin's, from the data folder (submissions are not public)
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
        return json.load(response)


def page(url: str) -> str:
    """The HTML a browser gets (``/`` redirects API clients to the JSON)."""
    request = urllib.request.Request(url, headers={"Accept": "text/html"})  # noqa: S310
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
        return response.read().decode("utf-8")


def wait_until(check, seconds: float, what: str, proc: subprocess.Popen) -> Any:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while True:
        assert proc.poll() is None, f"serve exited early while waiting for {what}"
        try:
            value = check()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {seconds} s waiting for {what}"
        time.sleep(0.5)


def require_docker() -> None:
    from client.examples import docker_answers

    if docker_answers():
        return
    if os.environ.get("DYNAEVAL_REQUIRE_DOCKER") == "1":
        pytest.fail("Docker is required here, but no engine answers")
    pytest.skip("no Docker engine answers")


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("runtime", ["process", pytest.param("docker", marks=pytest.mark.docker)])
def test_serve_scores_the_examples_and_stops_on_sigint(
    tmp_path: Path, cli_env: dict[str, str], runtime: str
) -> None:
    if runtime == "docker":
        require_docker()
    port = free_port()
    base = f"http://127.0.0.1:{port}/api/v1"
    log = (tmp_path / "serve.log").open("w+")
    proc = subprocess.Popen(
        [*dynaeval_command(), "serve", "--port", str(port), "--example-runtime", runtime],
        cwd=tmp_path,  # the examples must not depend on the current directory
        env=cli_env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    catalog = yaml.safe_load((REPO / "configs" / "examples.yaml").read_text())["models"]
    try:
        health = wait_until(lambda: get(base, "/health"), UP_S, "the API", proc)
        # The server listens before the example images are built and the models scored.
        assert health["status"] == "ok"
        assert health["jobs"].get("done", 0) < len(catalog), health
        # ready (for a load balancer) once every task's board is prepared, long before the
        # examples are scored
        ready = wait_until(lambda: get(base, "/ready"), UP_S, "readiness", proc)
        assert ready == {"status": "ready"}
        wait_until(
            lambda: "queued: " in page(f"http://127.0.0.1:{port}/") or None,
            ALL_DONE_S,  # with Docker, each model is queued once its image is built
            "the task list to show the queued or running examples",
            proc,
        )
        admin = json.loads((Path(cli_env["DYNAEVAL_DATA_DIR"]) / "local-admin.json").read_text())

        def all_finished() -> dict[str, int] | None:
            jobs = get(base, "/health")["jobs"]
            finished = jobs.get("done", 0) + jobs.get("failed", 0)
            return jobs if sum(jobs.values()) == len(catalog) == finished else None

        if runtime == "process":
            # The process runtime's path differs in how the examples start, not in how
            # they are scored (the docker run scores the whole catalogue): one scored model
            # on its board, then the stop with the others still queued or running.
            first = wait_until(
                lambda: get(base, "/health")["jobs"].get("done"), ALL_DONE_S, "a job done", proc
            )
            assert first >= 1
            listed = get(base, "/submissions", admin["token"])["submissions"]
            assert {s["runtime"]["kind"] for s in listed} == {"process"}
            done = next(s for s in listed if s["job"]["status"] == "done")
            board = get(base, f"/tasks/{done['task']}/leaderboard")
            assert done["id"] in {m["model_id"] for m in board["models"]}
        else:
            check_every_board(base, admin["token"], catalog, runtime, all_finished, proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = None
        log.seek(0)
        output = log.read()
        log.close()
    assert code == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    queued = f"queued {len(catalog)} example models ({runtime} runtime)"
    assert queued in output
    # The page's address comes first; the examples are queued once the server listens.
    lines = [line for line in output.splitlines() if line.startswith(("Dynaeval ", "queued "))]
    assert lines[0].startswith("Dynaeval leaderboards: open http://127.0.0.1:"), output[-3000:]
    assert output.index("Dynaeval API on") < output.index(queued)
    assert "ready: every leaderboard prepared in " in output, output[-3000:]
    # on its way out, serve kept every task's board for the next start
    kept = Path(cli_env["DYNAEVAL_DATA_DIR"]) / "blobs" / "boards"
    assert {f"{entry['task']}.board" for entry in catalog} <= {p.name for p in kept.iterdir()}


def check_every_board(
    base: str,
    token: str,
    catalog: list[dict[str, Any]],
    runtime: str,
    all_finished: Any,
    proc: subprocess.Popen[str],
) -> None:
    """Every example model scored and ranked on its task's board."""
    jobs = wait_until(all_finished, ALL_DONE_S, "every example job", proc)
    failures = [
        s for s in get(base, "/submissions", token)["submissions"] if s["job"]["status"] != "done"
    ]
    assert jobs == {"done": len(catalog)}, failures
    kinds = {s["runtime"]["kind"] for s in get(base, "/submissions", token)["submissions"]}
    assert kinds == {runtime}
    for task in {entry["task"] for entry in catalog}:
        board = get(base, f"/tasks/{task}/leaderboard")
        ranked = {m["name"]: m for m in board["models"]}
        expected = {e["name"] for e in catalog if e["task"] == task}
        assert set(ranked) == expected, (task, board["unranked"])
        for entry in ranked.values():
            assert isinstance(entry["dynascore"], float), (task, entry)
            assert len(entry["rounds"]) == len(board["rounds"])
    weighted = get(base, "/tasks/sentiment/leaderboard?weights=performance:4,memory:0")
    assert weighted["weights"]["memory"] == 0.0
    spec = get(base, "/openapi.json")
    assert "/api/v1/tasks/{task_name}/leaderboard" in spec["paths"]


def status_of(url: str) -> tuple[int, Any]:
    """The status and JSON body of a GET, errors included."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


@pytest.mark.timeout(120)
def test_serve_drains_before_it_closes(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """With --drain-s, a stopping serve answers /ready with 503 stopping while it still
    serves every request, then closes and exits 0; a second signal ends the drain."""
    port = free_port()
    base = f"http://127.0.0.1:{port}/api/v1"
    command = [*dynaeval_command(), "serve", "--port", str(port), "--no-examples"]
    command += ["--workers", "0", "--drain-s", "30"]
    log = (tmp_path / "serve.log").open("w+")
    proc = subprocess.Popen(
        command, cwd=tmp_path, env=cli_env, stdout=log, stderr=subprocess.STDOUT, text=True
    )
    try:
        wait_until(lambda: get(base, "/ready"), UP_S, "readiness", proc)
        proc.send_signal(signal.SIGTERM)
        stopping = wait_until(
            lambda: (lambda s: s if s[0] == 503 else None)(status_of(base + "/ready")),
            UP_S,
            "/ready to say stopping",
            proc,
        )
        assert stopping[1]["error"]["code"] == "stopping"
        assert get(base, "/health")["status"] == "ok"  # still serving
        assert get(base, "/tasks")["tasks"]
        proc.send_signal(signal.SIGTERM)  # a second signal: no 30 s wait
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.seek(0)
        output = log.read()
        log.close()
    assert code == 0, output[-3000:]
    assert "draining: /ready answers 503 for 30 s" in output, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
